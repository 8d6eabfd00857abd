/// <reference path="../pb_data/types.d.ts" />
// Every request's body arrives within `[pocketbase] read_timeout` (PocketBase's own
// 5 minutes, the whole request, body included), so that a stranger's slow body
// holds a connection no longer. LA6: only the upload route (and the service's routes
// that take a worker's files) gives its body longer, `[intake] read_timeout`, by moving
// its own connection's deadlines (lib/deadlines.js).
// Headers keep PocketBase's one-minute limit.
// (The hooks have no global onServe; the app's own hook is bound directly.)
$app.onServe().bindFunc((e) => {
  const ms = require(`${__hooks}/lib/settings.js`).ms("pocketbase", "read_timeout");
  e.server.readTimeout = ms * 1000000; // a Go time.Duration, in nanoseconds
  return e.next();
});

// The running release, for operators and their tools (no sign-in needed: a
// version is no secret, and an upgrade script asks before it is signed in).
routerAdd("GET", "/api/transcriber/version", (e) => {
  return e.json(200, { version: require(`${__hooks}/lib/settings.js`).processValue("version") || "unknown" });
});

// The sender's page (pb_public/, served by PocketBase at /): its own files and
// this server, nothing else — no inline script, no other origin, not framed;
// the microphone for voice notes, no other device. Revalidated on every load,
// so an upgrade shows at once (unchanged files answer 304). The validator is
// an ETag of the release, the file's size and its time: a wheel gives every
// file of every release the same time, so the time alone (PocketBase's
// Last-Modified) would answer 304 with the old release's page.
routerUse(new Middleware((e) => {
  const path = String(e.request.url.path);
  if ((e.request.method === "GET" || e.request.method === "HEAD") && path.indexOf("/api/") !== 0 && path.indexOf("/_/") !== 0) {
    const header = e.response.header();
    const settings = require(`${__hooks}/lib/settings.js`);
    const dir = settings.get("pocketbase", "public_dir");
    const name = path === "/" || path.endsWith("/") ? path.slice(1) + "index.html" : path.slice(1);
    if (dir !== "" && name.split("/").indexOf("..") < 0) {
      try {
        const info = $os.stat(dir + "/" + name);
        if (!info.isDir()) {
          header.set("ETag", "W/\"" + (settings.processValue("version") || "dev") + "-" + info.size() + "-" +
            info.modTime().unixMilli() + "\"");
        }
      } catch (_) {
        // no such file: PocketBase answers 404
      }
    }
    header.set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
      "media-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'");
    header.set("X-Content-Type-Options", "nosniff");
    header.set("Referrer-Policy", "no-referrer");
    header.set("Permissions-Policy", "microphone=(self), camera=(), geolocation=()");
    header.set("Cache-Control", "no-cache");
  }
  return e.next();
}, -1004, "transcriberPageHeaders"));
