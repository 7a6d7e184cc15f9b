package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// kustomization is the part of deploy/k8s/kustomization.yaml these tests
// read.
type kustomization struct {
	Resources          []string `yaml:"resources"`
	ConfigMapGenerator []struct {
		Name    string   `yaml:"name"`
		Files   []string `yaml:"files"`
		Options struct {
			DisableNameSuffixHash bool `yaml:"disableNameSuffixHash"`
		} `yaml:"options"`
	} `yaml:"configMapGenerator"`
	GeneratorOptions struct {
		DisableNameSuffixHash bool `yaml:"disableNameSuffixHash"`
	} `yaml:"generatorOptions"`
	Images []kustomizeImage `yaml:"images"`
}

type kustomizeImage struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
	Digest  string `yaml:"digest"`
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	var k kustomization
	readYAML(t, "k8s/kustomization.yaml", &k)
	return k
}

// generatedConfigMap returns the name of the ConfigMap that the
// kustomization generates and the content of its key, read from the file
// the generator names. A generated ConfigMap's name carries a hash of its
// content, in the pod template too: a change rolls the pods out.
func generatedConfigMap(t *testing.T, name, key string) (string, string) {
	t.Helper()
	k := readKustomization(t)
	for _, g := range k.ConfigMapGenerator {
		if g.Name != name {
			continue
		}
		if g.Options.DisableNameSuffixHash || k.GeneratorOptions.DisableNameSuffixHash {
			t.Errorf("configMapGenerator %s: disableNameSuffixHash: a changed policy would not roll out", name)
		}
		for _, f := range g.Files {
			k, path, ok := strings.Cut(f, "=")
			if !ok {
				k, path = filepath.Base(f), f
			}
			if k != key {
				continue
			}
			data, err := os.ReadFile(filepath.Join("k8s", path))
			if err != nil {
				t.Fatalf("configMapGenerator %s: %v", name, err)
			}
			return name, string(data)
		}
		t.Fatalf("configMapGenerator %s has no key %s", name, key)
	}
	t.Fatalf("k8s/kustomization.yaml generates no ConfigMap %s", name)
	return "", ""
}

// pinnedImage matches an image that names one build: a digest, or a
// version tag (v1.2.3, v1.2.3-rc.1).
var pinnedImage = regexp.MustCompile(`@sha256:[0-9a-f]{64}$|:v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)

// effectiveImage applies the kustomization's images: to image, as
// kustomize does.
func effectiveImage(k kustomization, image string) string {
	repo, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	for _, img := range k.Images {
		if img.Name != repo {
			continue
		}
		if img.NewName != "" {
			repo = img.NewName
		}
		if img.NewTag != "" {
			tag = img.NewTag
		}
		if img.Digest != "" {
			digest = img.Digest
		}
	}
	out := repo
	if tag != "" {
		out += ":" + tag
	}
	if digest != "" {
		out += "@" + digest
	}
	return out
}

func TestKubernetesRunsOneImmutableBuildOfTheEdge(t *testing.T) {
	k := readKustomization(t)
	var dep deploymentSpec
	kubeObj(t, kubeObjects(t), "Deployment/edge", "apps/v1", &dep)
	c := dep.Template.Spec.Containers[0]
	image := effectiveImage(k, c.Image)
	if !pinnedImage.MatchString(image) {
		t.Errorf("the edge's pods run %s: want a version tag (v1.2.3) or a digest, never a tag that moves, or nodes run different builds", image)
	}
	switch c.ImagePullPolicy {
	case "IfNotPresent", "Always":
	default:
		t.Errorf("imagePullPolicy %q: want IfNotPresent (the image is pinned) or Always", c.ImagePullPolicy)
	}
}

func TestEffectiveImageAppliesKustomizeImages(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		set         kustomizeImage
		image, want string
	}{
		{kustomizeImage{Name: "orgedge/edge", NewTag: "v1.2.3"}, "orgedge/edge", "orgedge/edge:v1.2.3"},
		{kustomizeImage{Name: "orgedge/edge", NewTag: "v1.2.3"}, "orgedge/edge:dev", "orgedge/edge:v1.2.3"},
		{kustomizeImage{Name: "orgedge/edge", NewName: "r.example/e", Digest: digest}, "orgedge/edge:dev", "r.example/e:dev@" + digest},
		{kustomizeImage{Name: "orgedge/edge", NewTag: "v1.2.3"}, "other/thing:dev", "other/thing:dev"},
	} {
		got := effectiveImage(kustomization{Images: []kustomizeImage{tc.set}}, tc.image)
		if got != tc.want {
			t.Errorf("%+v on %s = %s, want %s", tc.set, tc.image, got, tc.want)
		}
		if pinned := pinnedImage.MatchString(got); pinned != (tc.want != "other/thing:dev") {
			t.Errorf("%s pinned: %t", got, pinned)
		}
	}
}

func TestKubernetesPolicyIsAGeneratedConfigMapSoThatChangesRollOut(t *testing.T) {
	objs := kubeObjects(t)
	for key, o := range objs {
		if o.Kind == "ConfigMap" {
			t.Errorf("%s (%s) is a plain ConfigMap: its changes would not roll the pods out; generate it (configMapGenerator)", key, o.file)
		}
	}
	name, _ := generatedConfigMap(t, "edge-config", "edge.yaml")
	var dep deploymentSpec
	kubeObj(t, objs, "Deployment/edge", "apps/v1", &dep)
	found := false
	for _, v := range dep.Template.Spec.Volumes {
		found = found || v.ConfigMap != nil && v.ConfigMap.Name == name
	}
	if !found {
		t.Errorf("Deployment/edge mounts no volume of the generated ConfigMap %s", name)
	}
}

// networkPolicyPeer and networkPolicyRule are the parts of a NetworkPolicy
// these tests read.
type networkPolicyPeer struct {
	NamespaceSelector *struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"namespaceSelector"`
	PodSelector *struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"podSelector"`
	IPBlock *struct {
		CIDR string `yaml:"cidr"`
	} `yaml:"ipBlock"`
}

type networkPolicyRule struct {
	From  []networkPolicyPeer `yaml:"from"`
	Ports []struct {
		Port intOrString `yaml:"port"`
	} `yaml:"ports"`
}

func TestKubernetesNetworkPolicyAdmitsTheAdminPortOnlyFromPrometheus(t *testing.T) {
	objs := kubeObjects(t)
	var np struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string            `yaml:"policyTypes"`
		Ingress     []networkPolicyRule `yaml:"ingress"`
	}
	kubeObj(t, objs, "NetworkPolicy/edge", "networking.k8s.io/v1", &np)
	var dep deploymentSpec
	kubeObj(t, objs, "Deployment/edge", "apps/v1", &dep)
	if len(np.PodSelector.MatchLabels) == 0 {
		t.Error("NetworkPolicy/edge selects every pod of the namespace, want the edge's")
	}
	for k, v := range np.PodSelector.MatchLabels {
		if dep.Template.Metadata.Labels[k] != v {
			t.Errorf("NetworkPolicy/edge selects %s=%s, which the edge's pods lack", k, v)
		}
	}
	if len(np.PolicyTypes) > 0 && !strings.Contains(strings.Join(np.PolicyTypes, ","), "Ingress") {
		t.Errorf("NetworkPolicy/edge policyTypes %v: want Ingress", np.PolicyTypes)
	}
	ports := map[string]string{}
	for _, p := range dep.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.Name
		ports[strconv.Itoa(p.ContainerPort)] = p.Name
	}
	// admits[port name] lists the peers each rule admits to that port.
	admits := map[string][][]networkPolicyPeer{}
	for _, r := range np.Ingress {
		if len(r.Ports) == 0 {
			for _, name := range ports {
				admits[name] = append(admits[name], r.From)
			}
			continue
		}
		for _, p := range r.Ports {
			name, ok := ports[string(p.Port)]
			if !ok {
				t.Errorf("NetworkPolicy/edge admits port %s, which the edge's container does not have", p.Port)
			}
			admits[name] = append(admits[name], r.From)
		}
	}
	if len(admits["http"]) == 0 {
		t.Error("NetworkPolicy/edge admits nobody to the API port")
	}
	if len(admits["admin"]) == 0 {
		t.Error("NetworkPolicy/edge admits nobody to the admin port: Prometheus could not scrape it")
	}
	for _, from := range admits["admin"] {
		if len(from) == 0 {
			t.Error("NetworkPolicy/edge admits anyone to the admin port")
		}
		for _, peer := range from {
			if peer.IPBlock != nil || peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels) == 0 ||
				peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 {
				t.Errorf("NetworkPolicy/edge admits %+v to the admin port: want Prometheus' pods in the monitoring namespace only", peer)
			}
		}
	}
}
