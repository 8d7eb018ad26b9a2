package config

// yamlContext are the messages of the YAML parser's errors that carry a
// context (the collection being parsed). For those, yaml.v3 reports the
// context's line counted from 0 (it adds the 1 only to the scanner's
// errors), so a syntax error seemed to be a line, or with the next entry
// two lines, before where it is. The flow collections' context is where
// the bracket opened that is not closed.
var yamlContext = map[string]string{
	"did not find expected key":           "",
	"did not find expected '-' indicator": "",
	"found undefined tag handle":          "",
	"did not find expected ',' or ']'":    " (the [ opened on this line is not closed)",
	"did not find expected ',' or '}'":    " (the { opened on this line is not closed)",
}

// yamlParserLine returns the 1-based line and the message of a yaml.v3
// syntax error "yaml: line N: msg".
func yamlParserLine(line int, msg string) (int, string) {
	if note, ok := yamlContext[msg]; ok {
		return line + 1, msg + note
	}
	return line, msg
}
