// Package didyoumean finds the closest of a list of names to a misspelled
// one, for "did you mean" in configuration errors (config's own keys and
// connectors' plugin_config keys alike).
package didyoumean

import "strings"

// Closest returns the candidate closest to s, ignoring case, or "" when
// none is close: at most max(2, len(s)/3) edits away, or a shortened or
// lengthened form of at least four letters (a prefix, or a suffix after
// "_").
func Closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := levenshtein(ls, lc)
		if len(ls) >= 4 && len(lc) >= 4 && (strings.HasPrefix(lc, ls) || strings.HasPrefix(ls, lc) ||
			strings.HasSuffix(lc, "_"+ls) || strings.HasSuffix(ls, "_"+lc)) {
			d = min(d, 1) // a shortened or lengthened key: batch for batch_length, retries for max_retries
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(2, len(s)/3) {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	ar, br := []rune(a), []rune(b)
	prev := make([]int, len(br)+1)
	cur := make([]int, len(br)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ar); i++ {
		cur[0] = i
		for j := 1; j <= len(br); j++ {
			cost := 1
			if ar[i-1] == br[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(br)]
}
