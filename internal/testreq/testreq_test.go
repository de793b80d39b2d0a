package testreq

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeTB records what Skip asks of a test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeTB) Skipf(format string, a ...any)  { f.skip = fmt.Sprintf(format, a...) }

// TestSkip: a switch left unset skips and names the switch; set to its
// require value it fails; an unknown switch fails.
func TestSkip(t *testing.T) {
	t.Setenv("DRUTO_CC_TESTS", "")
	f := &fakeTB{TB: t}
	Skip(f, "DRUTO_CC_TESTS", "no %s", "gcc")
	if f.fatal != "" || !strings.Contains(f.skip, "no gcc") || !strings.Contains(f.skip, "DRUTO_CC_TESTS=require") {
		t.Errorf("unset: fatal %q skip %q", f.fatal, f.skip)
	}
	t.Setenv("DRUTO_CC_TESTS", "require")
	f = &fakeTB{TB: t}
	Skip(f, "DRUTO_CC_TESTS", "no gcc")
	if f.skip != "" || !strings.Contains(f.fatal, "DRUTO_CC_TESTS=require but no gcc") || !Required("DRUTO_CC_TESTS") {
		t.Errorf("require: fatal %q skip %q", f.fatal, f.skip)
	}
	f = &fakeTB{TB: t}
	Skip(f, "DRUTO_NO_SUCH_TESTS", "x")
	if f.skip != "" || !strings.Contains(f.fatal, "no switch DRUTO_NO_SUCH_TESTS") {
		t.Errorf("unknown: fatal %q skip %q", f.fatal, f.skip)
	}
}

var (
	skipCall = regexp.MustCompile(`\.Skip(f|Now)?\(`)
	viaRule  = regexp.MustCompile(`\b(gputest|testreq)\.Skip\(`)
	reqEnv   = regexp.MustCompile(`\btestreq\.(?:Skip\([a-z]+, |Required\()"([A-Z0-9_]+)"`)
	marker   = regexp.MustCompile(`// (require: ([A-Z0-9_]+)|skip: \S.*)`)
)

// TestEverySkipHasASwitch reads every test file of the module: a skip
// goes through testreq.Skip or gputest.Skip with a known switch, or
// carries a comment on its line or the one above naming its switch
// ("// require: DRUTO_X", where the test itself fails when the switch
// requires it) or saying why it is not about the machine ("// skip: -short",
// an opt-out). A new reason without a switch fails here.
func TestEverySkipHasASwitch(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(rel, filepath.Join("internal", "gputest")) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var prev string
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			s := sc.Text()
			for _, m := range reqEnv.FindAllStringSubmatch(s, -1) {
				if Lookup(m[1]) == nil {
					t.Errorf("%s:%d: switch %s is not in testreq.Switches", rel, line, m[1])
				}
			}
			if skipCall.MatchString(s) && !viaRule.MatchString(s) && !strings.HasPrefix(rel, filepath.Join("internal", "testreq")) {
				n++
				m := marker.FindStringSubmatch(s)
				if m == nil {
					m = marker.FindStringSubmatch(prev)
				}
				switch {
				case m == nil:
					t.Errorf("%s:%d: a skip with no switch: use testreq.Skip, or mark it \"// require: DRUTO_X\" or \"// skip: why it is not about the machine\": %s", rel, line, strings.TrimSpace(s))
				case m[2] != "" && Lookup(m[2]) == nil:
					t.Errorf("%s:%d: switch %s is not in testreq.Switches", rel, line, m[2])
				}
			}
			prev = s
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no direct skip found: the scan reads nothing")
	}
}

// TestCIRequires: .ci/run sets every switch CI can install to require,
// and none that it cannot (a GPU).
func TestCIRequires(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ci := string(b)
	for _, s := range Switches {
		set := strings.Contains(ci, fmt.Sprintf(`export %s="${%s:-%s}"`, s.Env, s.Env, s.Require))
		if set != s.CI {
			t.Errorf("%s: .ci/run sets it to %s: %v, want %v (%s)", s.Env, s.Require, set, s.CI, s.What)
		}
	}
}
