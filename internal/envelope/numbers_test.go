package envelope

import "testing"

func TestNumbersFit(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"a":1,"b":-2.5,"c":1e308}`, true},
		{`{"a":1e400}`, false},
		{`{"a":-1E+309}`, false},
		{`{"a":"1e400"}`, true}, // a string
		{`{"a":"\"","b":1e999}`, false},
		{`{"a":"\\","b":2}`, true},
		{`{"a":1e-400}`, true}, // underflow rounds to zero
		{`{"a":[1,2,3]}`, true},
		{`1e400`, false}, // the last value of the text
		{`{"a":true,"b":false,"c":1e999}`, false},
		{`{"a":true,"e":1E5}`, true},
	} {
		if got := NumbersFit([]byte(c.body)); got != c.want {
			t.Errorf("NumbersFit(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}
