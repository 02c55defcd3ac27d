package redisstore

import (
	"context"

	"github.com/herdhq/herd/store"
)

// requestScript appends a request's entry, "Q\n<action>\n<partition>\n<member>"
// (one of the two targets empty), and changes nothing else. ARGV: the
// entry.
var requestScript = logged(`
append(ARGV[1])
return {'ok'}
`)

// Request implements store.Store: one script appends the entry.
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	if err := s.begin(ctx, "Request", store.ValidateRequest(group, r)); err != nil {
		return err
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "Request", requestScript, k, nil,
		"Q\n"+r.Action+"\n"+r.Partition+"\n"+r.Member)
	if err != nil {
		return err
	}
	if status != "ok" {
		return unexpected("Request", status)
	}
	return nil
}
