package pgstore

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestScopeNamesDatabaseAndSchemaNeverThePassword(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	a := openIn(t, schema)
	b := openIn(t, schema)
	c := openIn(t, newSchema(t))
	if a.Scope() != b.Scope() {
		t.Errorf("two stores on one schema have scopes %q and %q; want one", a.Scope(), b.Scope())
	}
	if a.Scope() == c.Scope() {
		t.Errorf("two schemas have the same scope %q", a.Scope())
	}
	if !strings.Contains(a.Scope(), schema) {
		t.Errorf("scope %q does not name schema %q", a.Scope(), schema)
	}

	// A URL with a password (the server trusts this host: it is not checked).
	u, err := url.Parse(withOptions(testURL(), "schema", schema))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pass")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Open(ctx, u.String())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer d.Close()
	if strings.Contains(d.Scope(), "s3cret") {
		t.Errorf("scope %q shows the password", d.Scope())
	}
	if d.Scope() != a.Scope() {
		t.Errorf("the same schema through a URL with a password has scope %q; want %q", d.Scope(), a.Scope())
	}
}
