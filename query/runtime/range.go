package runtime

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Paging of the runtime view, as servant-pagination does it (the Marlowe
// Runtime's REST API uses it): the request header
//
//	Range: <field> [<value>][;limit <n>][;offset <n>][;order asc|desc]
//
// selects up to limit resources (default 100) starting at the one whose
// field is value (inclusive; the first of the list when absent), after
// skipping offset of them, in order (default desc: newest first). The
// answer is 206 with Accept-Ranges (the field), Content-Range
// ("<field> <first>..<last>"), and, when the page is full, Next-Range: the
// Range of the next page. Values are percent-encoded in these headers
// (a contract id's # is %23) and accepted either way in Range.

// Range limits of the view.
const (
	rangeDefaultLimit = 100
	// rangeMaxLimit bounds a page; a larger limit is refused, never cut
	// short silently (a short page would look like the end of the list).
	rangeMaxLimit = 10_000
	// rangeMaxOffset bounds the resources a page may skip: skipping reads
	// them, so its cost grows with the offset (positions by start value do
	// not: they are one lookup).
	rangeMaxOffset = 100_000
)

// pageRange is a parsed Range header.
type pageRange struct {
	field  string
	value  string // "" for the start of the list; percent-decoded
	hasVal bool
	limit  int
	offset int
	desc   bool
}

// parseRange reads the Range header of a list whose range field is field.
// An absent header is the default range: the newest 100.
func parseRange(h http.Header, field string) (*pageRange, error) {
	vals := h.Values("Range")
	pr := &pageRange{field: field, limit: rangeDefaultLimit, desc: true}
	switch len(vals) {
	case 0:
		return pr, nil
	case 1:
	default:
		return nil, &rangeError{"Range is given more than once"}
	}
	text := vals[0]
	if len(text) > 1024 {
		return nil, &rangeError{"Range is longer than 1024 bytes"}
	}
	pieces := strings.Split(text, ";")
	first := strings.Fields(pieces[0])
	if len(first) == 0 || first[0] != field {
		got := ""
		if len(first) > 0 {
			got = first[0]
		}
		return nil, &rangeError{fmt.Sprintf("Invalid Range: this list pages by %s, not %q (Range: %s [<value>][;limit n][;offset n][;order asc|desc])",
			field, api.Clip(got), field)}
	}
	switch len(first) {
	case 1:
	case 2:
		v, err := url.PathUnescape(first[1])
		if err != nil {
			return nil, &rangeError{fmt.Sprintf("Invalid Range: value %q is not percent-encoded text", api.Clip(first[1]))}
		}
		pr.value, pr.hasVal = v, true
	default:
		return nil, &rangeError{fmt.Sprintf("Invalid Range: %q has more than one value", api.Clip(pieces[0]))}
	}
	seen := map[string]bool{}
	for _, piece := range pieces[1:] {
		kv := strings.Fields(piece)
		if len(kv) != 2 {
			return nil, &rangeError{fmt.Sprintf("Invalid Range Options: %q is not <option> <value>", api.Clip(strings.TrimSpace(piece)))}
		}
		opt, arg := kv[0], kv[1]
		if seen[opt] {
			return nil, &rangeError{fmt.Sprintf("Invalid Range Options: %s is given twice", api.Clip(opt))}
		}
		seen[opt] = true
		switch opt {
		case "limit":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > rangeMaxLimit {
				return nil, &rangeError{fmt.Sprintf("Invalid Range Options: limit %q: want an integer from 0 to %d", api.Clip(arg), rangeMaxLimit)}
			}
			pr.limit = n
		case "offset":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > rangeMaxOffset {
				return nil, &rangeError{fmt.Sprintf("Invalid Range Options: offset %q: want an integer from 0 to %d", api.Clip(arg), rangeMaxOffset)}
			}
			pr.offset = n
		case "order":
			switch arg {
			case "asc":
				pr.desc = false
			case "desc":
				pr.desc = true
			default:
				return nil, &rangeError{fmt.Sprintf("Invalid Range Order %q: want asc or desc", api.Clip(arg))}
			}
		default:
			return nil, &rangeError{fmt.Sprintf("Invalid Range Options: unknown option %q (limit, offset or order)", api.Clip(opt))}
		}
	}
	return pr, nil
}

// want is how many resources a page reads from its start: the skipped ones
// and the page.
func (pr *pageRange) want() int { return pr.offset + pr.limit }

// order names the range's order.
func (pr *pageRange) order() string {
	if pr.desc {
		return "desc"
	}
	return "asc"
}

// encodeRangeValue percent-encodes a value as servant-pagination does
// (everything but unreserved characters).
func encodeRangeValue(v string) string {
	const upperHex = "0123456789ABCDEF"
	b := make([]byte, 0, len(v)+4)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return string(b)
}

// span is a page's place in its list: the range values of its first and
// last resources, and how many it holds (the values are unique: ids).
type span struct {
	first, last string
	n           int
}

// spanOf is the span of a page's items.
func spanOf[T any](items []T, key func(*T) string) span {
	if len(items) == 0 {
		return span{}
	}
	return span{first: key(&items[0]), last: key(&items[len(items)-1]), n: len(items)}
}

// setPageHeaders writes the paging headers of a page.
func setPageHeaders(h http.Header, pr *pageRange, sp span) {
	h.Set("Accept-Ranges", pr.field)
	if sp.n == 0 {
		return
	}
	h.Set("Content-Range", pr.field+" "+encodeRangeValue(sp.first)+".."+encodeRangeValue(sp.last))
	if sp.n < pr.limit {
		return
	}
	// The next page starts at the last resource and skips it.
	offset := 1
	if pr.hasVal && pr.value == sp.last {
		offset = pr.offset + sp.n
	}
	h.Set("Next-Range", pr.field+" "+encodeRangeValue(sp.last)+";limit "+strconv.Itoa(pr.limit)+";offset "+strconv.Itoa(offset)+
		";order "+pr.order())
}

// after is the seq a list's read goes on after to start at (inclusive) the
// item whose records span seqs first to last: first-1 ascending, last+1
// descending.
func (pr *pageRange) after(first, last int64) int64 {
	if pr.desc {
		return last + 1
	}
	return first - 1
}

// firstRead is what the first read of a list's range answered: the list's
// count (the reads ask for it once) and the position the answer shows.
type firstRead struct {
	at    contractstore.Position
	total *int64
}

// keep notes a read's count and position when it is the first (*count,
// the read's Count, is true) and turns Count off for the next reads.
func (f *firstRead) keep(count *bool, total *int64, at contractstore.Position) {
	if *count {
		f.total, f.at, *count = total, at, false
	}
}

// nextPage answers a page read for readRange or collect: it notes the
// read's count and position in first (keep) and, when the page has items,
// has after move the next read past the last.
func nextPage[T any](first *firstRead, count *bool, items []T, more bool, total *int64, at contractstore.Position,
	after func(last *T)) ([]T, bool, error) {
	first.keep(count, total, at)
	if n := len(items); n > 0 {
		after(&items[n-1])
	}
	return items, more, nil
}
