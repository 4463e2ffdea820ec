package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Record data (keys, ids, types, topics, exception messages, error texts)
// comes from whoever could write the record or the row: a producer, a
// consumer's error, a receiver's answer. Printed raw, an escape sequence
// in it could move the cursor, clear lines or recolour the terminal, and a
// bidirectional override could reorder what the operator reads: a replay
// summary's UNVERIFIED lines could be hidden. So every field the CLI
// prints from a record goes through printable (tables) or
// escapeJSONControls (JSON).

// unsafeRune reports whether r must not reach a terminal as it is: a
// control character (Unicode Cc: C0, DEL, C1), a format character (Cf:
// the bidirectional embeddings, overrides and isolates U+202A..U+202E and
// U+2066..U+2069, the marks U+200E/U+200F, zero-width characters, tag
// characters) or a line or paragraph separator (U+2028, U+2029).
func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// printable returns s for one line of a table: tabs, carriage returns and
// line feeds become spaces, every other unsafe rune is shown escaped
// (\u202e, \x1b), and bytes that are not UTF-8 as \xNN, so that the
// operator sees that something was there.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeJSONControls rewrites the unsafe runes of encoded JSON as \uXXXX
// escapes (a surrogate pair above U+FFFF). encoding/json already escapes
// C0 controls and U+2028/U+2029, but not DEL, the C1 controls or the
// format characters; outside strings JSON holds only ASCII, so every
// such rune is inside a string, where the escape decodes to the same
// text: the output means the same to a program and shows nothing hidden
// on a terminal.
func escapeJSONControls(encoded []byte) []byte {
	s := string(encoded)
	clean := true
	for _, r := range s {
		if unsafeRune(r) && r != '\n' {
			clean = false
			break
		}
	}
	if clean {
		return encoded
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || !unsafeRune(r):
			b.WriteRune(r)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return []byte(b.String())
}
