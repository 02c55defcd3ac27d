package etcdstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// FuzzEntryDecoders: the decoders of entries decode what encoding/json
// decodes, and fail where it fails.
func FuzzEntryDecoders(f *testing.F) {
	at := time.UnixMicro(1795837056251344)
	var raws [][]byte
	for _, c := range []store.Change{
		{Kind: store.Claimed, Partition: "17", Session: fuzzSession, Member: "m1", Epoch: 1795837056251344},
		{Kind: store.Released, Partition: "city:west", Session: fuzzSession, Epoch: 7, GivenBack: fuzzSession},
		{Kind: store.SessionOpened, Session: fuzzSession, Member: "m", Weight: 3},
		{Kind: store.Requested, Partition: "p", Action: "drain"},
		{Kind: store.PartitionsSet, Partitions: []store.Partition{{ID: "a"}, {ID: "b", Weight: 2}}},
	} {
		e := []byte(mustJSON(entryOf(c, at)))
		tagged, _ := chain(5, e)
		raws = append(raws, e, tagged)
	}
	for _, r := range raws {
		f.Add(r)
	}
	f.Add(joinJSON(raws))
	f.Add(joinJSON(raws[:2]))
	for _, s := range []string{`[]`, `{}`, `[{}]`, `[{},]`, `{"k":01}`, `{"k":-1}`, `{"k":1.5}`, `{"K":4}`, `{"p":"a\"b"}`,
		`{"p":"é"}`, `{"k":4 }`, `{"k":18446744073709551616}`, `{"w":9223372036854775808}`, `{"e":18446744073709551615}`,
		`{"k":4,"k":5}`, `[{"k":4}]x`, `{"x":1}`, `{"p":null}`, `[{"k":4},{"k":5}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want entry
		wantErr := json.Unmarshal(b, &want)
		got, err := decodeEntryJSON(b)
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeEntryJSON(%q) = %+v, %v; encoding/json: %+v, %v", b, got, err, want, wantErr)
		}
		var wantEs []entry
		wantErr = json.Unmarshal(b, &wantEs)
		es, err := decodeEntries(b)
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(es, wantEs) {
			t.Fatalf("decodeEntries(%q) = %+v, %v; encoding/json: %+v, %v", b, es, err, wantEs, wantErr)
		}
		var wantRaws []json.RawMessage
		wantErr = json.Unmarshal(b, &wantRaws)
		rs, err := splitEntries(b)
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(rs, wantRaws) {
			t.Fatalf("splitEntries(%q) = %q, %v; encoding/json: %q, %v", b, rs, err, wantRaws, wantErr)
		}
	})
}
