package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Environment variables the command reads; flags win over them, and they
// win over the config file.
const (
	envConfig       = "ORGCTL_CONFIG"
	envContext      = "ORGCTL_CONTEXT"
	envAPI          = "ORGCTL_API"
	envIssuer       = "ORGCTL_ISSUER"
	envClientID     = "ORGCTL_CLIENT_ID"
	envClientSecret = "ORGCTL_CLIENT_SECRET"
)

// devContext is the context that exists without a config file: the
// development mode of the edge (go run ./cmd/edge -dev), on its fixed
// addresses. A config file may redefine it.
const devContext = "dev"

// devSettings are devContext's values when the config file does not define it.
var devSettings = Context{
	API:      "http://127.0.0.1:8080",
	Issuer:   "http://127.0.0.1:8081/realms/dev",
	ClientID: "cli",
}

// Context is one installation: where its API is and how its people log in.
type Context struct {
	API      string `yaml:"api"`
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"client-id"`
}

// configFile is the YAML file of contexts.
type configFile struct {
	CurrentContext string             `yaml:"current-context,omitempty"`
	Contexts       map[string]Context `yaml:"contexts,omitempty"`
}

// dirs are where the command keeps its files.
type dirs struct {
	config string // the config file
	tokens string // one file per context, owner-only
}

// locate finds the config file and the token directory: $ORGCTL_CONFIG or
// <user config dir>/orgctl/config.yaml, and <user config dir>/orgctl/tokens.
func locate(getenv func(string) string, flagPath string) (dirs, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return dirs{}, fmt.Errorf("find the user config directory (set %s, or HOME): %w", envConfig, err)
	}
	d := dirs{config: filepath.Join(base, "orgctl", "config.yaml"), tokens: filepath.Join(base, "orgctl", "tokens")}
	if p := getenv(envConfig); p != "" {
		d.config = p
	}
	if flagPath != "" {
		d.config = flagPath
	}
	return d, nil
}

// loadConfig reads the config file; a missing file is an empty one.
func loadConfig(path string) (*configFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &configFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var c configFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, usageErrorf("config file %s: %v", path, err)
	}
	return &c, nil
}

// save writes the config file, owner-only: it may name internal addresses.
func (c *configFile) save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	return writeFileAtomic(path, data, 0o600)
}

// names returns the context names, the development context included.
func (c *configFile) names() []string {
	names := []string{devContext}
	for n := range c.Contexts {
		if n != devContext {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// context returns the named context as the file defines it (or the
// development context's built-in values).
func (c *configFile) context(name string) (Context, bool) {
	if ctx, ok := c.Contexts[name]; ok {
		return ctx, true
	}
	if name == devContext {
		return devSettings, true
	}
	return Context{}, false
}

// settings are what a command runs with, resolved from flags, environment
// and the config file, in that order.
type settings struct {
	dirs         dirs
	file         *configFile
	contextName  string
	Context             // API, Issuer, ClientID
	clientSecret string // set: a service account (client credentials)
}

// resolve picks the context (flag, ORGCTL_CONTEXT, the file's
// current-context, dev) and overrides its values with the environment and
// then the flags.
func resolve(getenv func(string) string, g *globalFlags) (*settings, error) {
	d, err := locate(getenv, g.config)
	if err != nil {
		return nil, err
	}
	file, err := loadConfig(d.config)
	if err != nil {
		return nil, err
	}
	s := &settings{dirs: d, file: file}
	s.contextName = first(g.context, getenv(envContext), file.CurrentContext, devContext)
	ctx, ok := file.context(s.contextName)
	if !ok {
		return nil, usageErrorf("no context %q in %s (orgctl context list shows them; orgctl context set %s --api ... --issuer ... --client-id ... adds it)",
			s.contextName, d.config, s.contextName)
	}
	s.API = first(g.api, getenv(envAPI), ctx.API)
	s.Issuer = first(g.issuer, getenv(envIssuer), ctx.Issuer)
	s.ClientID = first(g.clientID, getenv(envClientID), ctx.ClientID)
	s.clientSecret = first(g.clientSecret, getenv(envClientSecret))
	s.API = strings.TrimSuffix(s.API, "/")
	s.Issuer = strings.TrimSuffix(s.Issuer, "/")
	return s, nil
}

// first returns the first non-empty string.
func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// writeFileAtomic writes data to a temporary file with perm in path's
// directory and renames it over path, so that a reader never sees half a
// file and the permissions hold from the first byte.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
