package guest

import "testing"

func TestRegister(t *testing.T) {
	defer func() { registered = nil }()
	mustPanic(t, "Register needs Init, Add, Merge and Emit", func() { Register(Aggregate{Init: func() ([]byte, error) { return nil, nil }}) })
	ok := func([]byte) ([]byte, error) { return nil, nil }
	two := func(a, b []byte) ([]byte, error) { return nil, nil }
	a := Aggregate{Init: func() ([]byte, error) { return []byte{1}, nil }, Add: two, Merge: two, Emit: ok}
	Register(a)
	if st, _ := registered.Init(); len(st) != 1 {
		t.Fatalf("registered Init returned %v", st)
	}
	mustPanic(t, "Register called twice", func() { Register(a) })
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r == nil || r.(string) != "udaf/guest: "+want {
			t.Fatalf("panic %v, want %q", r, want)
		}
	}()
	f()
}
