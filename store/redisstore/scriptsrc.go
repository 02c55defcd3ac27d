package redisstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scriptSources maps each script's SHA1 to its source, so that an error
// the server reports at a line of a script can name the command there.
var scriptSources sync.Map // sha1 hex -> source

// newScript is redis.NewScript, remembering the source.
func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	scriptSources.Store(s.Hash(), src)
	return s
}

// scriptACLError matches Redis 7's reply when a script calls a command
// its user may not run: "ERR The user executing the script can't run this
// command or subcommand script: <sha1>, on @user_script:<line>."
var scriptACLError = regexp.MustCompile(`can't run this command or subcommand script: ([0-9a-f]{40}), on @user_script:(\d+)`)

var callAt = regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)

// deniedInScript names the command a script was refused, from the line the
// server reports, or returns "" if msg is not such a refusal.
func deniedInScript(msg string) string {
	m := scriptACLError.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	src, ok := scriptSources.Load(m[1])
	line, _ := strconv.Atoi(m[2])
	if ok {
		lines := strings.Split(src.(string), "\n")
		if line >= 1 && line <= len(lines) {
			if c := callAt.FindStringSubmatch(lines[line-1]); c != nil {
				return fmt.Sprintf("the Redis user may not run %s (called by herd's script at line %d): allow it to the user (see docs/security.md for the ACL rule, and +acl|dryrun so that Open checks it)", strings.ToUpper(c[1]), line)
			}
		}
	}
	return fmt.Sprintf("the Redis user may not run a command herd's script calls at line %d: allow herd's commands to the user (see docs/security.md for the ACL rule, and +acl|dryrun so that Open checks it)", line)
}
