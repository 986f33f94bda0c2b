package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestParseKeyFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []APIKey // Name, Limits, Source compared
		wantErr []string // substrings, all must appear
	}{
		{
			name: "comments blanks and overrides",
			in: "# darkroom keys\n\n  alice = s3cret-alice  \n" +
				"bob=b0b==;rate=10;burst=40;budget=500;approvalAbove=50;inflight=8;createRate=2;createBurst=5\n" +
				"carol=c#not-a-comment;RATE=0.5;\n   # indented comment\r\n",
			want: []APIKey{
				{Name: "alice", Source: "keys:3"},
				{Name: "bob", Source: "keys:4", Limits: Overrides{
					PollRate: ptr(10.0), PollBurst: ptr(40), BudgetPerDay: ptr(int64(500)),
					ApprovalAboveCredits: ptr(int64(50)), MaxInFlight: ptr(8),
					CreateRate: ptr(2.0), CreateBurst: ptr(5),
				}},
				{Name: "carol", Source: "keys:5", Limits: Overrides{PollRate: ptr(0.5)}},
			},
		},
		{name: "empty file", in: "\n# nothing\n", want: nil},
		{name: "missing equals", in: "alice=a\njustasecret\n", wantErr: []string{"keys:2: expected name=secret"}},
		{name: "empty secret", in: "alice=\n", wantErr: []string{"keys:1:", `key "alice": empty secret`}},
		{name: "empty secret with overrides", in: "alice= ;rate=1\n", wantErr: []string{"keys:1:", "empty secret"}},
		{name: "empty name", in: "=secret\n", wantErr: []string{"keys:1: empty key name"}},
		{name: "bad name", in: "al ice=secret\n", wantErr: []string{"keys:1: invalid key name"}},
		{name: "secret with space", in: "alice=sec ret\n", wantErr: []string{"keys:1:", "whitespace"}},
		{name: "duplicate name", in: "alice=one\nbob=two\nalice=three\n", wantErr: []string{`keys:3: duplicate key name "alice" (first defined at keys:1)`}},
		{name: "duplicate secret", in: "alice=same\nbob=same\n", wantErr: []string{`keys:2: key "bob" has the same secret as key "alice" (keys:1)`}},
		{name: "unknown override", in: "alice=s;speed=3\n", wantErr: []string{"keys:1:", `unknown override "speed"`}},
		{name: "override twice", in: "alice=s;rate=1;Rate=2\n", wantErr: []string{"keys:1:", "given twice"}},
		{name: "bad rate", in: "alice=s;rate=-1\n", wantErr: []string{"keys:1:", `rate="-1"`}},
		{name: "nan rate", in: "alice=s;rate=NaN\n", wantErr: []string{"keys:1:", "rate"}},
		{name: "zero burst", in: "alice=s;burst=0\n", wantErr: []string{"keys:1:", `burst="0"`}},
		{name: "bad budget", in: "alice=s;budget=lots\n", wantErr: []string{"keys:1:", "budget"}},
		{name: "override without value", in: "alice=s;inflight\n", wantErr: []string{"keys:1:", "expected name=value"}},
		{name: "all bad lines reported", in: "x\nalice=\nok=fine\n=y\n", wantErr: []string{"keys:1:", "keys:2:", "keys:4:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKeyFile([]byte(tt.in), "keys")
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %d keys, want error", len(got))
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			compareKeys(t, got, tt.want)
		})
	}
}

func compareKeys(t *testing.T, got, want []APIKey) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d keys, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Source != w.Source {
			t.Errorf("key %d = %s@%s, want %s@%s", i, g.Name, g.Source, w.Name, w.Source)
		}
		if d := diffOverrides(g.Limits, w.Limits); d != "" {
			t.Errorf("key %s limits: %s", g.Name, d)
		}
	}
}

func diffOverrides(a, b Overrides) string {
	var out []string
	cmp := func(name string, eq bool) {
		if !eq {
			out = append(out, name)
		}
	}
	cmp("PollRate", eqPtr(a.PollRate, b.PollRate))
	cmp("PollBurst", eqPtr(a.PollBurst, b.PollBurst))
	cmp("CreateRate", eqPtr(a.CreateRate, b.CreateRate))
	cmp("CreateBurst", eqPtr(a.CreateBurst, b.CreateBurst))
	cmp("BudgetPerDay", eqPtr(a.BudgetPerDay, b.BudgetPerDay))
	cmp("ApprovalAboveCredits", eqPtr(a.ApprovalAboveCredits, b.ApprovalAboveCredits))
	cmp("MaxInFlight", eqPtr(a.MaxInFlight, b.MaxInFlight))
	return strings.Join(out, ", ")
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestParseKeyErrorsNeverEchoSecrets(t *testing.T) {
	const secret = "TOPSECRETVALUE"
	inputs := []string{
		"alice=" + secret + "\nbob=" + secret + "\n",
		"alice=" + secret + ";speed=1\n",
		"alice=" + secret + ";rate=x\n",
		"a b=" + secret + "\n",
		secret + "\n",
	}
	for _, in := range inputs {
		_, err := ParseKeyFile([]byte(in), "keys")
		if err == nil {
			t.Fatalf("%q: want error", in)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error leaks secret: %v", err)
		}
	}
}

func TestParseKeyList(t *testing.T) {
	tests := []struct {
		in      string
		want    []APIKey
		wantErr string
	}{
		{in: "alice=one,bob=two;rate=3;burst=9", want: []APIKey{
			{Name: "alice", Source: "ENV entry 1"},
			{Name: "bob", Source: "ENV entry 2", Limits: Overrides{PollRate: ptr(3.0), PollBurst: ptr(9)}},
		}},
		{in: " alice=one , ,bob=two,", want: []APIKey{
			{Name: "alice", Source: "ENV entry 1"},
			{Name: "bob", Source: "ENV entry 3"},
		}},
		{in: "", want: nil},
		{in: "alice=one,bob=", wantErr: `ENV entry 2: key "bob": empty secret`},
		{in: "alice=one,alice=two", wantErr: `ENV entry 2: duplicate key name "alice" (first defined at ENV entry 1)`},
		{in: "alice=one;createBurst=x", wantErr: "ENV entry 1: key \"alice\": override createBurst=\"x\""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseKeyList(tt.in, "ENV")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			compareKeys(t, got, tt.want)
		})
	}
}

func TestKeyStoreLookup(t *testing.T) {
	var keys []APIKey
	secrets := map[string]string{}
	for i := range 50 {
		name := "k" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('0'+i/26))
		secret := "secret-" + name + "-" + strings.Repeat("z", i)
		k, err := NewAPIKey(name, []byte(secret), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		secrets[name] = secret
	}
	ks, err := NewKeyStore(keys)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Len() != 50 {
		t.Fatalf("Len = %d", ks.Len())
	}
	for name, secret := range secrets {
		k, ok := ks.Lookup(secret)
		if !ok || k.Name != name {
			t.Errorf("Lookup(secret of %s) = %q, %v", name, k.Name, ok)
		}
		if p := k.Principal(); p.ID != "key:"+name || p.Kind != KindKey {
			t.Errorf("principal = %+v", p)
		}
		for _, wrong := range []string{secret[:len(secret)-1], secret + "z", strings.ToUpper(secret), " " + secret} {
			if k, ok := ks.Lookup(wrong); ok {
				t.Errorf("Lookup(%q) matched %s", wrong, k.Name)
			}
		}
	}
	for _, s := range []string{"", "nope"} {
		if _, ok := ks.Lookup(s); ok {
			t.Errorf("Lookup(%q) matched", s)
		}
	}
	var empty *KeyStore
	if _, ok := empty.Lookup("x"); ok || empty.Len() != 0 {
		t.Error("nil store matched")
	}
	// Cross-source duplicates are refused.
	if _, err := NewKeyStore(append(keys, keys[3])); err == nil {
		t.Error("NewKeyStore accepted a duplicate")
	}
}

func TestLoadKeyFileAndConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	if err := os.WriteFile(path, []byte("alice=from-file;inflight=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		EnvAPIKeysFile: path,
		EnvAPIKeys:     "bob=from-env",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] }, "https://dr.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Keys) != 2 || cfg.Keys[0].Name != "alice" || cfg.Keys[1].Name != "bob" || cfg.OAuth != nil || !cfg.Configured() {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg.Keys[0].Source != path+":1" || *cfg.Keys[0].Limits.MaxInFlight != 2 {
		t.Errorf("alice = %+v", cfg.Keys[0])
	}

	env[EnvAPIKeys] = "alice=other"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }, ""); err == nil || !strings.Contains(err.Error(), "duplicate key name") {
		t.Errorf("cross-source duplicate: err = %v", err)
	}

	env = map[string]string{EnvOAuthJWKSURL: "https://idp.example/jwks"}
	_, err = ConfigFromEnv(func(k string) string { return env[k] }, "")
	if err == nil || !strings.Contains(err.Error(), "issuer is required") || !strings.Contains(err.Error(), "audience is required") {
		t.Errorf("oauth without issuer/audience: err = %v", err)
	}

	env = map[string]string{
		EnvOAuthJWKSURL: "https://idp.example/jwks", EnvOAuthIssuer: "https://idp.example",
		EnvOAuthScopes: "darkroom:generate, darkroom:read", EnvOAuthClockSkew: "10s",
	}
	cfg, err = ConfigFromEnv(func(k string) string { return env[k] }, "https://dr.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.OAuth
	if o.Audience != "https://dr.example/mcp" || o.ClockSkew.String() != "10s" || strings.Join(o.RequiredScopes, "|") != "darkroom:generate|darkroom:read" {
		t.Errorf("oauth = %+v", o)
	}

	env[EnvOAuthAlgorithms] = "HS256"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }, "https://dr.example/mcp"); err == nil || !strings.Contains(err.Error(), `"HS256" not allowed`) {
		t.Errorf("HS256: err = %v", err)
	}

	env = map[string]string{EnvOAuthScopes: "darkroom:generate"}
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }, "https://dr.example/mcp"); err == nil || !strings.Contains(err.Error(), "JWKS URL or JWKS file is required") {
		t.Errorf("half-configured oauth: err = %v", err)
	}

	if cfg, err := ConfigFromEnv(func(string) string { return "" }, ""); err != nil || cfg.Configured() {
		t.Errorf("empty env: %+v, %v", cfg, err)
	}
}
