package errlist

import (
	"errors"
	"testing"
)

type fieldErr struct{ msg string }

func (e *fieldErr) Error() string { return e.msg }

func TestError(t *testing.T) {
	t.Parallel()
	one := []*fieldErr{{"a.toml:1: x: bad"}}
	if got := Error(one); got != "a.toml:1: x: bad" {
		t.Fatalf("one error: %q", got)
	}
	two := append(one, &fieldErr{"a.toml:2: y: bad"})
	if got, want := Error(two), "2 configuration errors:\n  a.toml:1: x: bad\n  a.toml:2: y: bad"; got != want {
		t.Fatalf("two errors: %q, want %q", got, want)
	}
	if got := Error([]*fieldErr(nil)); got != "no errors" {
		t.Fatalf("none: %q", got)
	}
	var target *fieldErr
	if !errors.As(errors.Join(Unwrap(two)...), &target) || target != two[0] {
		t.Fatal("Unwrap does not expose the errors")
	}
}
