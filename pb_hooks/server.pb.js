/// <reference path="../pb_data/types.d.ts" />
// LA6: an upload on a slow line may take longer than PocketBase's default read
// timeout (the whole request, body included), which cut it off with no answer.
// `[intake] read_timeout` sets it; headers keep PocketBase's 30-second limit,
// so an idle connection is still dropped quickly.
// (The hooks have no global onServe; the app's own hook is bound directly.)
$app.onServe().bindFunc((e) => {
  const ms = require(`${__hooks}/lib/respond.js`).envInt("TRANSCRIBER_INTAKE__READ_TIMEOUT_MS", 3 * 3600 * 1000);
  e.server.readTimeout = ms * 1000000; // a Go time.Duration, in nanoseconds
  return e.next();
});

// The running release, for operators and their tools (no sign-in needed: a
// version is no secret, and an upgrade script asks before it is signed in).
routerAdd("GET", "/api/transcriber/version", (e) => {
  return e.json(200, { version: $os.getenv("TRANSCRIBER_VERSION") || "unknown" });
});
