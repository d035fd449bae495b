package jsonfields

import (
	"reflect"
	"testing"
)

type inner struct {
	A int `json:"a"`
	B string
}

type outer struct {
	inner
	*Ptr
	C      []int `json:"c,omitempty"`
	D      bool  `json:"-"`
	hidden int
	E      *float64
	Named  inner `json:"named"`
}

type Ptr struct {
	P string `json:"p"`
}

func TestOf(t *testing.T) {
	got := Of(reflect.TypeOf(&outer{}))
	want := map[string]reflect.Type{"a": reflect.TypeOf(0), "B": reflect.TypeOf(""), "p": reflect.TypeOf(""),
		"c": reflect.TypeOf([]int{}), "E": reflect.TypeOf((*float64)(nil)), "named": reflect.TypeOf(inner{})}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if Of(reflect.TypeOf(3)) != nil || Of(nil) != nil {
		t.Fatal("a non-struct has fields")
	}
	if !Has(reflect.TypeOf(outer{}), "named") || Has(reflect.TypeOf(outer{}), "D") || Has(reflect.TypeOf(outer{}), "hidden") {
		t.Fatal("Has")
	}
}
