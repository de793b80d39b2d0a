package druto

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesDocumented walks every package of the module and fails on
// an exported name without a doc comment (the gonum rule: every exported
// name documented in a sentence that starts with the name; constants and
// variables may share their group's comment).
func TestExportedNamesDocumented(t *testing.T) {
	fset := token.NewFileSet()
	var missing []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "build" || name == "notebooks") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		report := func(pos token.Pos, what string) {
			missing = append(missing, fset.Position(pos).String()+": "+what)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Doc != nil {
					if !startsWith(d.Doc.Text(), d.Name.Name) {
						report(d.Pos(), "func "+d.Name.Name+": doc does not start with its name")
					}
					continue
				}
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if s, ok := recv.(*ast.StarExpr); ok {
						recv = s.X
					}
					if ix, ok := recv.(*ast.IndexExpr); ok {
						recv = ix.X
					}
					if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
						continue
					}
				}
				report(d.Pos(), "func "+d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
							report(s.Pos(), "type "+s.Name.Name)
						}
						if doc := s.Doc; doc == nil && len(d.Specs) == 1 {
							doc = d.Doc
							if s.Name.IsExported() && doc != nil && !startsWith(doc.Text(), s.Name.Name) {
								report(s.Pos(), "type "+s.Name.Name+": doc does not start with its name")
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
								report(n.Pos(), "value "+n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("undocumented exported name: %s", m)
	}
}

// startsWith reports whether a doc comment's first sentence starts with
// name, allowing a leading article ("A Device ...", "The Policy ...").
func startsWith(doc, name string) bool {
	for _, a := range []string{"", "A ", "An ", "The "} {
		if rest, ok := strings.CutPrefix(doc, a+name); ok && (rest == "" || !isIdentRune(rest[0])) {
			return true
		}
	}
	return false
}

func isIdentRune(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
