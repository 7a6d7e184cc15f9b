package config

// Parse decodes YAML onto Default, without environment overrides and
// without validation, for this package's tests of the decoding alone
// (Load is parse, ApplyEnv and Validate).
func Parse(data []byte) (*Config, error) {
	c, _, err := parse(data)
	return c, err
}
