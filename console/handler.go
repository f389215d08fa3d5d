package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// securityPolicy lets a console page run only the console's own script
// and style, talk only to its own origin, and be framed by nobody.
const securityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console's paths: /ui (to /ui/), /ui/ (the page, for
// a session; a page saying how to log in otherwise), /ui/assets/ (the
// script and style), GET /ui/login?token= and POST /ui/logout. The API
// serves it without a credential: the page checks the session itself,
// and the assets hold nothing that is not in the binary.
func (c *Console) Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	files := http.StripPrefix("/ui/assets/", http.FileServerFS(static))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		if !c.Session(r) {
			page(w, http.StatusUnauthorized, "Log in to the Ferry console",
				"This browser is not logged in. Run `ferry ui` on the machine where the runtime runs, as the user that runs it (or with its --api-key), and open the link it prints: it works once, for a few minutes.")
			return
		}
		index, err := assets.ReadFile("assets/index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(index)
	})
	mux.Handle("GET /ui/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache") // revalidated: a new binary brings new assets
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET "+LoginPath, func(w http.ResponseWriter, r *http.Request) {
		cookie, key, ok := c.login(r.URL.Query().Get("token"))
		if !ok {
			page(w, http.StatusUnauthorized, "This login link does not work",
				"The link was used already, has expired (links work once, for a few minutes), or comes from another run of the runtime. Run `ferry ui` again for a new one.")
			return
		}
		http.SetCookie(w, c.cookie(r.Host, cookie, int(MaxAge.Seconds())))
		w.Header().Set("Cache-Control", "no-store")
		// The token leaves the address bar; the page key arrives in the
		// fragment, which browsers send to no server, and the page moves
		// it into its origin's storage at once.
		http.Redirect(w, r, "/ui/#key="+key, http.StatusSeeOther)
	})
	mux.HandleFunc("POST /ui/logout", func(w http.ResponseWriter, r *http.Request) {
		c.logout(r)
		http.SetCookie(w, c.cookie(r.Host, "", -1))
		w.WriteHeader(http.StatusNoContent)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", securityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer") // a login link's token never leaves in a Referer
		h.Set("X-Frame-Options", "DENY")
		mux.ServeHTTP(w, r)
	})
}

// IsPath reports whether an API path belongs to the console's Handler.
func IsPath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/ui/assets/console.css"></head>
<body class="notice"><main><h1>{{.Title}}</h1><p>{{.Text}}</p></main></body></html>
`))

// page answers a short HTML page (escaped by html/template).
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, struct{ Title, Text string }{title, text})
}
