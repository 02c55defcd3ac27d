package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storeurl"
)

// secretMark is in every password FuzzStoreURL makes.
const secretMark = "Sekr3tMark"

// FuzzStoreURL picks the backend of a URL whose user info holds a
// password (percent-encoded or not), and opens it when it is mem:// (the
// others' parsers have targets of their own; opening them would dial):
// every error wraps ErrInvalid and holds no password (docs/fuzzing.md).
func FuzzStoreURL(f *testing.F) {
	f.Add("mem", "", "", "", "", uint8(0))
	f.Add("mem", "u", "pw", "h", "/x", uint8(1))
	f.Add("redis", "u", "p/w", "h:6379", "/0", uint8(2))
	f.Add("nosuch", "u", "pw", "h", "", uint8(1))
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, tail string, mode uint8) {
		if strings.Contains(scheme+user+host+tail, secretMark) {
			return
		}
		raw := scheme + "://" + user + host + tail
		pass += secretMark
		switch mode % 3 {
		case 1: // percent-encoded, as it should be
			raw = scheme + "://" + user + ":" + strings.ReplaceAll(url.QueryEscape(pass), "+", "%2B") + "@" + host + tail
		case 2: // as typed, '/', '?', '@' and all
			raw = scheme + "://" + user + ":" + pass + "@" + host + tail
		}
		s, err := storeurl.Scheme(raw)
		if err == nil && s == "mem" {
			var st store.Store
			st, err = storeurl.Open(context.Background(), raw)
			if err == nil {
				st.Close()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("%q: %v; want ErrInvalid", raw, err)
			}
			if strings.Contains(err.Error(), secretMark) {
				t.Fatalf("%q: the error holds the password: %v", raw, err)
			}
		}
	})
}
