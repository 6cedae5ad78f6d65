// Command podtemplate-schema prints, for every Go struct reachable from core/v1 PodTemplateSpec, how
// encoding/json marshals its fields. Its output is crates/daemonset/src/history/pod_template_schema.txt
// (after the comment header), which the Rust revision-data encoder uses to write a template the way Go
// does. Rerun it when moving to a new k8s.io/api version:
//
//	cd crates/daemonset/tools && go run ./podtemplate-schema
//
// Type codes: s string, b bool, i integer, t metav1.Time, q resource.Quantity, x intstr.IntOrString,
// r any other type with its own JSON marshaller, *T pointer, [T] slice, <T> string-keyed map, @Name struct.
// A trailing ? means omitempty and ~ means omitzero. Embedded structs without a JSON name are flattened.
package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

type walker struct {
	pending []reflect.Type
	known   map[reflect.Type]bool
}

func (w *walker) typeCode(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(metav1.Time{}):
		return "t"
	case reflect.TypeOf(resource.Quantity{}):
		return "q"
	case reflect.TypeOf(intstr.IntOrString{}):
		return "x"
	}
	if t.Kind() != reflect.Ptr && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)) {
		return "r"
	}
	switch t.Kind() {
	case reflect.String:
		return "s"
	case reflect.Bool:
		return "b"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "i"
	case reflect.Float32, reflect.Float64:
		return "f"
	case reflect.Ptr:
		return "*" + w.typeCode(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "y"
		}
		return "[" + w.typeCode(t.Elem()) + "]"
	case reflect.Map:
		return "<" + w.typeCode(t.Elem()) + ">"
	case reflect.Struct:
		if !w.known[t] {
			w.known[t] = true
			w.pending = append(w.pending, t)
		}
		return "@" + t.Name()
	}
	return "r"
}

func (w *walker) fields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, w.fields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		flags := ""
		for _, option := range parts[1:] {
			switch option {
			case "omitempty":
				flags += "?"
			case "omitzero":
				flags += "~"
			}
		}
		out = append(out, name+":"+w.typeCode(f.Type)+flags)
	}
	return out
}

func main() {
	w := &walker{known: map[reflect.Type]bool{}}
	w.typeCode(reflect.TypeOf(v1.PodTemplateSpec{}))
	for i := 0; i < len(w.pending); i++ {
		t := w.pending[i]
		fmt.Println(strings.Join(append([]string{t.Name()}, w.fields(t)...), " "))
	}
}
