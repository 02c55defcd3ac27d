// Package urlauth splits the authority of a store URL into its user info
// and host list, and rebuilds a URL for messages without its secrets: the
// parts redisstore's and pgstore's URL parsers share.
package urlauth

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// UserInfo is a URL's user name and password, percent-decoded (RawPass:
// the password as written).
type UserInfo struct {
	User, Pass, RawPass string
	HasUser, HasPass    bool
}

// Split splits what follows "scheme://" into its user info, its host list
// and the rest (path and query). Its errors quote nothing of the URL.
func Split(rest string) (cred UserInfo, hosts, tail string, err error) {
	// The authority ends at the first '/' or '?'; its user info ends at its
	// last '@'. A '@' further on means the password holds an unescaped '/'
	// or '?', and the split would be wrong: say so without echoing anything.
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth := rest[:end]
	tail = rest[end:]
	if strings.Contains(tail, "@") {
		return cred, "", "", errors.New("malformed: an '@' after the host (percent-encode '/', '?', '#', '@' and '%' in the user name and password)")
	}
	hosts = auth
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		info := auth[:at]
		hosts = auth[at+1:]
		cred.HasUser = true
		u, p, colon := strings.Cut(info, ":")
		if cred.User, err = url.PathUnescape(u); err != nil {
			return cred, "", "", errors.New("the user name is not validly percent-encoded")
		}
		if colon {
			cred.HasPass, cred.RawPass = true, p
			if cred.Pass, err = url.PathUnescape(p); err != nil {
				return cred, "", "", errors.New("the password is not validly percent-encoded")
			}
		}
	}
	if strings.Contains(auth, "#") || strings.Contains(tail, "#") {
		return cred, "", "", errors.New("has a fragment ('#'); percent-encode '#' in the user name and password")
	}
	return cred, hosts, tail, nil
}

// Redact rebuilds a URL for messages: the password and the values of the
// secret options become "xxxxx".
func Redact(scheme string, cred UserInfo, hosts, path string, q url.Values, secretOptions ...string) string {
	var b strings.Builder
	b.WriteString(scheme + "://")
	if cred.HasUser {
		b.WriteString(url.PathEscape(cred.User))
		if cred.HasPass {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	b.WriteString(hosts)
	b.WriteString(path)
	if len(q) > 0 {
		c := url.Values{}
		for k, v := range q {
			if slices.Contains(secretOptions, k) {
				v = []string{"xxxxx"}
			}
			c[k] = v
		}
		b.WriteString("?" + c.Encode())
	}
	return b.String()
}
