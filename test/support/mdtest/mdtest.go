// Package mdtest reads Markdown the way GitHub renders it, for the tests
// that check the documentation: the anchors of a page's headings, and the
// text outside its fenced code blocks.
package mdtest

import (
	"regexp"
	"strconv"
	"strings"
)

// WithoutCodeBlocks returns text without its fenced code blocks (``` lines
// and what lies between them), whose brackets and # lines are neither links
// nor headings.
func WithoutCodeBlocks(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

var heading = regexp.MustCompile(`^#{1,6}\s(.*)`)

// Anchors returns the anchors GitHub gives the headings of a Markdown text
// (Slug of each), a repeated one getting -1, -2, ... after the first.
func Anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for line := range strings.Lines(WithoutCodeBlocks(text)) {
		m := heading.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if m == nil {
			continue
		}
		a := Slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var slugDrop = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)

// Slug is the anchor GitHub gives a heading's text: lower case, punctuation
// other than '-' and '_' dropped, spaces turned into '-'.
func Slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}
