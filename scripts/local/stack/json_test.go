package stack_test

import "encoding/json"

func jsonParse(s string, v any) error { return json.Unmarshal([]byte(s), v) }
