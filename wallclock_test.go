package herd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Ownership rests on the store's clock (sessions expire by it; the store
// answers with durations, never instants) and on the monotonic clock (the
// fence time, back-offs, waits): a member whose wall clock steps keeps every
// guarantee because every instant the runtime holds is a time.Now reading,
// compared only with other such readings, which Go does on the monotonic
// clock. A step of the wall clock cannot be made in a test (the monotonic
// reading inside a time.Time cannot be set apart from the wall one), so
// this test keeps the runtime from calling what would make a wall reading
// matter: stripping the monotonic reading (Round(0), Truncate, UTC, Local,
// In), turning an instant into wall-clock numbers (Unix...), or making an
// instant from them (time.Unix..., time.Date, time.Parse).
func TestRuntimeUsesNoWallClockInstants(t *testing.T) {
	strips := map[string]bool{"UTC": true, "Local": true, "In": true, "Unix": true, "UnixMilli": true,
		"UnixMicro": true, "UnixNano": true}
	makes := map[string]bool{"Unix": true, "UnixMilli": true, "UnixMicro": true, "Date": true, "Parse": true,
		"ParseInLocation": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n++
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			isTime := pkg != nil && pkg.Name == "time"
			zeroArg := len(call.Args) == 1 && isZero(call.Args[0])
			switch {
			case isTime && makes[sel.Sel.Name]:
				t.Errorf("%s: time.%s makes an instant from the wall clock's numbers; the runtime must keep time.Now readings (monotonic) or durations from the store",
					fset.Position(call.Pos()), sel.Sel.Name)
			case !isTime && strips[sel.Sel.Name] && len(call.Args) <= 1:
				t.Errorf("%s: .%s strips the monotonic reading or reads the wall clock's numbers; a step of the wall clock would then move what it decides",
					fset.Position(call.Pos()), sel.Sel.Name)
			case (sel.Sel.Name == "Round" || sel.Sel.Name == "Truncate") && zeroArg:
				t.Errorf("%s: .%s(0) strips the monotonic reading", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if n < 10 {
		t.Fatalf("read %d files of the runtime; want the root package's", n)
	}
}

func isZero(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Value == "0"
}
