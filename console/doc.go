// Package console is the runtime's web console: the pages at /ui on the
// management API, and the one-time login that lets a browser in without
// anyone typing a key into a page.
//
// # Logging in
//
// The console sits behind the API's own credential. A caller that holds
// it ([http] api_key, or the local token only the runtime's user can
// read) asks for a login link (POST /ui/login-links, answered by
// [Console.NewLink]): a random token, good for one use within
// [LinkLifetime]. `ferry ui` does this and prints (and opens) the link,
// as Jupyter prints its token URL. Opening the link (GET /ui/login?token=)
// spends the token and answers with a session cookie and a redirect to
// /ui/, so the token never stays in the address bar or the history, and a
// link copied from a terminal's scroll-back is worth nothing once used.
//
// The session cookie is HttpOnly (no script reads it), SameSite=Strict (no
// other site's page makes the browser send it), Secure when the API
// serves HTTPS, and named after the API's port. A cookie alone would not
// do: browsers send a host's cookies to every port of it, so a server
// another user runs on the same machine would receive it from the
// operator's browser. So the login also gives the page a key, in the
// redirect's fragment (which no server sees), that the page keeps in its
// own origin's storage (which other ports cannot read) and sends in the
// X-Ferry-Console header: the API accepts the cookie only with the key
// of its session ([Console.Authorized]). A session ends after
// [IdleTimeout] without a request, after [MaxAge] in all, at POST
// /ui/logout, and when the runtime restarts: sessions live in memory
// only, and a restarted runtime asks for `ferry ui` again. The API
// accepts a session wherever it accepts the key; a request that changes
// state must also come from the console's own origin (the API's guard and
// its session check both look), and every body is JSON, which a
// cross-site form cannot send.
//
// # The pages
//
// One HTML page, one script and one style sheet, embedded in the binary
// (no build step, nothing fetched from elsewhere). The script renders
// every value from the runtime as text nodes, never as markup, and the
// pages are served with a Content-Security-Policy that allows only the
// console's own script and style, so a message payload, an error text or
// a connector name cannot run in the operator's browser. The script talks
// to the API's ordinary endpoints (/stats, /sinks, .../configs,
// .../dead_letters, /streams, ...); the console adds no data path of its
// own.
//
// Written by hand rather than with a front-end framework: the console is
// a few tables and forms, and a framework would need a build step and a
// bundle that the binary would carry for little.
package console
