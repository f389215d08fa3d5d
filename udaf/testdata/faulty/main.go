// Command faulty is the misbehaving WebAssembly aggregate of package
// udaf's tests: it counts its inputs, except that an input containing
// "trap" panics, "spin" loops forever, "grow" allocates without bound and
// "fail" returns an error; a state of "bad-emit" emits bytes that are not
// JSON.
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/ferryhq/ferry/udaf/guest"
)

func main() {}

var hoard [][]byte

func init() {
	guest.Register(guest.Aggregate{
		Init: func() ([]byte, error) { return []byte("0"), nil },
		Add: func(state, input []byte) ([]byte, error) {
			switch {
			case bytes.Contains(input, []byte("trap")):
				panic("trap: the aggregate gave up")
			case bytes.Contains(input, []byte("spin")):
				for {
				}
			case bytes.Contains(input, []byte("grow")):
				for {
					hoard = append(hoard, make([]byte, 1<<20))
				}
			case bytes.Contains(input, []byte("fail")):
				return nil, errors.New("fail: this input is refused")
			case bytes.Contains(input, []byte("bad-emit")):
				return []byte("bad-emit"), nil
			}
			n, err := strconv.Atoi(string(state))
			if err != nil {
				return nil, err
			}
			return strconv.AppendInt(nil, int64(n+1), 10), nil
		},
		Merge: func(a, b []byte) ([]byte, error) {
			x, err := strconv.Atoi(string(a))
			if err != nil {
				return nil, err
			}
			y, err := strconv.Atoi(string(b))
			if err != nil {
				return nil, err
			}
			return strconv.AppendInt(nil, int64(x+y), 10), nil
		},
		Emit: func(state []byte) ([]byte, error) {
			if string(state) == "bad-emit" {
				return []byte("{not json"), nil
			}
			return state, nil
		},
	})
}
