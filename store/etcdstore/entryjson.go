package etcdstore

import (
	"encoding/json"
	"strconv"

	"github.com/herdhq/herd/store"
)

// Every member decodes every entry of its group's log, and encoding/json
// (which checks the whole input, then decodes it by reflection) was a
// third of a member's CPU on the fleet bench's 10 to 20 on 1,024. The
// entries herd writes are flat objects of strings and integers, without
// spaces or escapes: the decoders below read those, and leave anything
// else (a set or loads in the entry, an escape, a space, a field herd does
// not write) to encoding/json, so that they decode exactly as it does
// (FuzzEntryDecoders compares them).

// decodeEntries decodes a JSON array of entries (a sequenced log key).
func decodeEntries(b []byte) ([]entry, error) {
	if es, _, ok := flatEntries(b, false); ok {
		return es, nil
	}
	var es []entry
	err := json.Unmarshal(b, &es)
	return es, err
}

// splitEntries splits a JSON array into its values (a pending key's
// entries).
func splitEntries(b []byte) ([]json.RawMessage, error) {
	if _, raws, ok := flatEntries(b, true); ok {
		return raws, nil
	}
	var raws []json.RawMessage
	err := json.Unmarshal(b, &raws)
	return raws, err
}

// decodeEntryJSON decodes one entry.
func decodeEntryJSON(b []byte) (entry, error) {
	if e, end, ok := flatEntry(b, 0); ok && end == len(b) {
		return e, nil
	}
	var e entry
	err := json.Unmarshal(b, &e)
	return e, err
}

// flatEntries reads b as an array of flat entries: the entries, or (raw)
// their JSON; ok false if b is not one.
func flatEntries(b []byte, raw bool) (es []entry, raws []json.RawMessage, ok bool) {
	if len(b) < 2 || b[0] != '[' {
		return nil, nil, false
	}
	i := 1
	if b[i] == ']' {
		if raw {
			return nil, []json.RawMessage{}, i+1 == len(b)
		}
		return []entry{}, nil, i+1 == len(b)
	}
	for {
		e, end, ok := flatEntry(b, i)
		if !ok || end >= len(b) {
			return nil, nil, false
		}
		if raw {
			raws = append(raws, json.RawMessage(b[i:end:end]))
		} else {
			es = append(es, e)
		}
		switch b[end] {
		case ',':
			i = end + 1
		case ']':
			return es, raws, end+1 == len(b)
		default:
			return nil, nil, false
		}
	}
}

// flatEntry reads the flat entry that starts at b[i]: the entry and the
// index after it; ok false if it is not one.
func flatEntry(b []byte, i int) (e entry, end int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return e, 0, false
	}
	i++
	if i < len(b) && b[i] == '}' {
		return e, i + 1, true
	}
	for {
		key, j, ok := flatString(b, i)
		if !ok || j >= len(b) || b[j] != ':' {
			return e, 0, false
		}
		i = j + 1
		switch key {
		case "s", "m", "p", "g", "a", "set":
			var v string
			if v, i, ok = flatString(b, i); !ok {
				return e, 0, false
			}
			switch key {
			case "s":
				e.Session = v
			case "m":
				e.Member = v
			case "p":
				e.Partition = v
			case "g":
				e.GivenBack = v
			case "a":
				e.Action = v
			default:
				e.Set = v
			}
		case "k", "w", "n", "e", "at", "t":
			var v uint64
			if v, i, ok = flatUint(b, i); !ok {
				return e, 0, false
			}
			switch key {
			case "k", "w", "n", "at":
				if v > uint64(int64(^uint(0)>>1)) {
					return e, 0, false
				}
			}
			switch key {
			case "k":
				e.Kind = store.ChangeKind(v)
			case "w":
				e.Weight = int(v)
			case "n":
				e.Chunks = int(v)
			case "at":
				e.At = int64(v)
			case "e":
				e.Epoch = v
			default:
				e.Tag = v
			}
		default:
			return e, 0, false
		}
		if i >= len(b) {
			return e, 0, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return e, i + 1, true
		default:
			return e, 0, false
		}
	}
}

// flatString reads the JSON string at b[i] if it holds only printable
// ASCII and no escape: its value and the index after it.
func flatString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", 0, false
		}
	}
	return "", 0, false
}

// flatUint reads the JSON number at b[i] if it is a whole number without
// a sign, an exponent or leading zeros that fits in a uint64.
func flatUint(b []byte, i int) (uint64, int, bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || j-i > 1 && b[i] == '0' || j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(string(b[i:j]), 10, 64)
	return v, j, err == nil
}
