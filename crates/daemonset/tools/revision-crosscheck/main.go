// Command revision-crosscheck writes random DaemonSets and the revision data upstream's controller would
// compute for them, to check the Rust encoder byte for byte:
//
//	cd crates/daemonset/tools && go run ./revision-crosscheck 2000 /tmp/revision-fixtures
//	MINI_KCM_REVISION_FIXTURES=/tmp/revision-fixtures cargo test -p mini-kcm-daemonset \
//	    --test revision_data_crosscheck -- --ignored
//
// in.jsonl has one DaemonSet per line as the API server serves it; out.jsonl the matching revision data.
// Each object first goes through protobuf, as kube-controller-manager receives it, and the revision data is
// computed the way upstream does: marshal the DaemonSet, decode into a generic map (integers kept as
// int64), take spec.template, add "$patch":"replace", marshal {"spec":{"template":...}}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/randfill"
)

// Characters that exercise Go's string escaping.
var pieces = []string{"<", ">", "&", "\n", "\t", "\u2028", "\u2029", "\x01", "\x1f", "\x7f", "é", "😀", "\"", "\\", "\b", "\f", "a", "b", "Z", "0"}

func revisionData(ds *apps.DaemonSet) string {
	whole, err := json.Marshal(ds)
	if err != nil {
		panic(err)
	}
	var generic map[string]interface{}
	if err := utiljson.Unmarshal(whole, &generic); err != nil {
		panic(err)
	}
	template := generic["spec"].(map[string]interface{})["template"].(map[string]interface{})
	template["$patch"] = "replace"
	out, err := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"template": template}})
	if err != nil {
		panic(err)
	}
	return string(out)
}

func filler(seed int) *randfill.Filler {
	nilChance := []float64{0.2, 0.5, 0.8, 0.95}[seed%4]
	return randfill.NewWithSeed(int64(seed)).NilChance(nilChance).NumElements(0, 2).Funcs(
		func(s *string, c randfill.Continue) {
			n := c.Intn(4)
			out := ""
			for i := 0; i < n; i++ {
				out += pieces[c.Intn(len(pieces))]
			}
			*s = out
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(100000), resource.DecimalSI)
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Time{Time: time.Unix(c.Int63n(2000000000), 0).UTC()}
		},
		func(x *intstr.IntOrString, c randfill.Continue) {
			if c.Intn(2) == 0 {
				*x = intstr.FromInt32(c.Int31n(1000) - 500)
			} else {
				*x = intstr.FromString(pieces[c.Intn(len(pieces))])
			}
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			f.Raw = []byte(`{"f:a":{}}`)
		},
	)
}

func main() {
	count, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	dir := os.Args[2]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	inFile, err := os.Create(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		panic(err)
	}
	outFile, err := os.Create(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		panic(err)
	}
	in, out := bufio.NewWriter(inFile), bufio.NewWriter(outFile)
	for seed := 0; seed < count; seed++ {
		var template v1.PodTemplateSpec
		filler(seed).Fill(&template)
		// API validation requires scaleIO.secretRef, and k8s-openapi cannot tell a nil one from an empty one.
		for i := range template.Spec.Volumes {
			if sio := template.Spec.Volumes[i].ScaleIO; sio != nil && sio.SecretRef == nil {
				sio.SecretRef = &v1.LocalObjectReference{}
			}
		}
		sent := &apps.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "default"},
			Spec: apps.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: template,
			},
		}
		wire, err := sent.Marshal()
		if err != nil {
			panic(err)
		}
		held := &apps.DaemonSet{}
		if err := held.Unmarshal(wire); err != nil {
			panic(err)
		}
		held.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
		served, err := json.Marshal(held)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(in, string(served))
		fmt.Fprintln(out, revisionData(held))
	}
	if err := in.Flush(); err != nil {
		panic(err)
	}
	if err := out.Flush(); err != nil {
		panic(err)
	}
}
