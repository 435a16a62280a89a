package file

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// itemParser parses a file like Parse, re-parsing only the services whose
// text changed since its last successful parse (doc.go rule 5). The zero
// value is ready; it is not safe for concurrent use.
type itemParser struct {
	// head is the text before the first item of the last successful parse
	// on the item path; every item was parsed as head + item.
	head []byte
	// items holds that parse's items by the SHA-256 of their text: a
	// service, or why it is skipped.
	items map[[sha256.Size]byte]parsedItem
}

// parsedItem is one item parsed on its own: its service, or why it is
// skipped (its Index is the item's position when it was parsed).
type parsedItem struct {
	svc     registries.Service
	skipped *Skipped
}

// parse returns what Parse returns for data. When data has the simple block
// layout (splitItems), each item is parsed on its own, as the head followed
// by the item, unless the last successful parse had the same head and an item
// of the same text; any error, an item that is not one service, or a host
// two items declare falls back to Parse of the whole data, so services,
// skipped services and errors are Parse's.
func (p *itemParser) parse(data []byte) ([]registries.Service, []Skipped, error) {
	head, items, ok := splitItems(data)
	if !ok {
		return p.parseWhole(data)
	}
	known := p.items
	if !bytes.Equal(head, p.head) {
		known = nil
	}
	next := make(map[[sha256.Size]byte]parsedItem, len(items))
	hosts := make(map[string]struct{}, len(items))
	out := make([]registries.Service, 0, len(items))
	var skipped []Skipped
	var doc []byte
	for i, item := range items {
		key := sha256.Sum256(item)
		it, ok := known[key]
		if !ok {
			doc = append(append(doc[:0], head...), item...)
			svcs, skips, err := Parse(doc)
			switch {
			case err == nil && len(svcs) == 1 && len(skips) == 0:
				it = parsedItem{svc: svcs[0]}
			case err == nil && len(svcs) == 0 && len(skips) == 1:
				it = parsedItem{skipped: &skips[0]}
			default:
				return p.parseWhole(data)
			}
		}
		next[key] = it
		if it.skipped != nil {
			s := *it.skipped
			s.Index = i
			skipped = append(skipped, s)
			continue
		}
		if _, dup := hosts[it.svc.Host]; dup {
			return p.parseWhole(data)
		}
		hosts[it.svc.Host] = struct{}{}
		out = append(out, it.svc)
	}
	slices.SortFunc(out, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) })
	p.head, p.items = bytes.Clone(head), next
	return out, skipped, nil
}

// parseWhole is Parse; a success empties the cache (it holds only the last
// successful parse's items, and that parse had none), a failure keeps it.
func (p *itemParser) parseWhole(data []byte) ([]registries.Service, []Skipped, error) {
	svcs, skipped, err := Parse(data)
	if err == nil {
		p.head, p.items = nil, nil
	}
	return svcs, skipped, err
}

// splitItems splits data into its head and the items of its top-level
// services list when data has the simple block layout, and reports whether
// it does:
//
//   - data holds no tab, carriage return, NEL, line or paragraph separator
//     (YAML line breaks and indentation this split does not follow), and no
//     '&', '*' or '!' (anchors, aliases and tags) anywhere;
//   - its lines, split at '\n', are: blank lines and full-line comments
//     (spaces, then '#') anywhere; one "services:" line at column 0, with
//     only spaces and a comment after the colon; after it, items, each
//     starting at a line of n spaces and "-" followed by a space or the end
//     of the line, n the same for every item; and inside an item, lines
//     indented by more than n spaces.
//
// The head is the text up to the first item's line; each item runs up to
// the next item's line or the end of data, so head and items together are
// data.
func splitItems(data []byte) (head []byte, items [][]byte, ok bool) {
	if !plain(data) {
		return nil, nil, false
	}
	indent := -1 // the items' indentation; -1 before the "services:" line, -2 after it
	start := -1  // the offset of the current item's line
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n') + 1
		if end == 0 {
			end = len(data) - off
		}
		line := data[off : off+end]
		spaces := len(line) - len(bytes.TrimLeft(line, " "))
		rest := bytes.TrimRight(line[spaces:], "\n")
		switch {
		case len(rest) == 0 || rest[0] == '#':
			// A blank line or a comment belongs to the item it follows.
		case indent == -1:
			if spaces > 0 || !servicesKey(rest) {
				return nil, nil, false
			}
			indent = -2
		case (indent == -2 || spaces == indent) && rest[0] == '-' && (len(rest) == 1 || rest[1] == ' '):
			if start >= 0 {
				items = append(items, data[start:off])
			} else {
				head = data[:off]
			}
			indent, start = spaces, off
		case indent >= 0 && spaces > indent:
			// A line of the current item.
		default:
			return nil, nil, false
		}
		off += end
	}
	if start < 0 {
		return nil, nil, false
	}
	return head, append(items, data[start:]), true
}

// servicesKey reports whether line (without its indentation and line break)
// is the key "services:" with at most spaces and a comment after it.
func servicesKey(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("services:"))
	if !ok {
		return false
	}
	value := bytes.TrimLeft(rest, " ")
	return len(value) == 0 || (value[0] == '#' && len(value) < len(rest))
}

// plain reports whether data holds none of the bytes and characters
// splitItems refuses anywhere: tab, carriage return, '&', '*', '!', and the
// line breaks NEL (U+0085), LS (U+2028) and PS (U+2029).
func plain(data []byte) bool {
	for _, c := range []byte("\t\r&*!") {
		if bytes.IndexByte(data, c) >= 0 {
			return false
		}
	}
	for _, s := range []string{"\u0085", "\u2028", "\u2029"} {
		if bytes.Contains(data, []byte(s)) {
			return false
		}
	}
	return true
}
