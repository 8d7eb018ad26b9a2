package provider

import (
	"context"
	"strings"
	"testing"
)

type fake struct{ cfg Config }

func (fake) Open(context.Context, *Request) (Stream, error)     { return nil, nil }
func (fake) Complete(context.Context, *Request) ([]byte, error) { return nil, nil }

func TestRegistry(t *testing.T) {
	Register("test-kind", func(c Config) (Provider, error) { return fake{c}, nil })
	p, err := New(Config{Name: "x", Kind: "test-kind", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil || p.(fake).cfg.Name != "x" {
		t.Fatalf("New(test-kind): got %v, %v; want the factory's provider", p, err)
	}
	_, err = New(Config{Kind: "nope"})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "test-kind") {
		t.Errorf("New(nope): got %v, want an error naming the kind and the supported ones", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a kind twice did not panic")
		}
	}()
	Register("test-kind", func(Config) (Provider, error) { return nil, nil })
}
