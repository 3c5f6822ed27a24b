package httpapi

import "net/http"

// Routes is a ServeMux that lists what it serves: a handler of several
// routes embeds it, registers each with Handle, and serves them
// (ServeHTTP) and names them (Patterns) for whoever mounts it beside
// others (the upload function's two handlers, the local stack's API).
type Routes struct {
	mux      *http.ServeMux
	patterns []string
}

// Handle registers h for pattern ("METHOD /path/{var}").
func (rs *Routes) Handle(pattern string, h http.HandlerFunc) {
	if rs.mux == nil {
		rs.mux = http.NewServeMux()
	}
	rs.mux.HandleFunc(pattern, h)
	rs.patterns = append(rs.patterns, pattern)
}

// Patterns lists the method and pattern of every route registered.
func (rs *Routes) Patterns() []string { return append([]string(nil), rs.patterns...) }

// ServeHTTP routes a request; one no route matches is NotFound.
func (rs *Routes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rs.mux == nil {
		NotFound(w, r)
		return
	}
	rs.mux.ServeHTTP(w, r)
}
