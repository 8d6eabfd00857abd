/// <reference path="../pb_data/types.d.ts" />
// H2: wrong passwords are limited per (account, address), and never so that a
// stranger locks the account's holder out (lib/logins.js); PocketBase's own
// limiter limits every auth door per address (the rate limit migrations).
onRecordAuthWithPasswordRequest((e) => require(`${__hooks}/lib/logins.js`).guard(e));

// A reset confirmed with the mailed token: its password within bcrypt's bytes (lib/password.js); then
// the address it came from is the holder's.
onRecordConfirmPasswordResetRequest((e) => {
  require(`${__hooks}/lib/password.js`).checkReset(e);
  require(`${__hooks}/lib/logins.js`).resetConfirmed(e);
});

// A body sent to an auth door (sign-in, OTP, reset, verification, e-mail change) is refused
// past 64 KB before anything reads it (413, lib/errors.js): a 10 MB password was decoded before any check.
routerUse(new Middleware((e) => {
  if (/^\/api\/collections\/[^/]+\/(auth-|request-|confirm-|impersonate)/.test(String(e.request.url.path))) {
    return $apis.bodyLimit(require(`${__hooks}/lib/password.js`).DOOR_BODY_BYTES).func(e);
  }
  return e.next();
}, -995, "transcriberAuthDoorBodies"));

// A password sign-in's answer carries the device's token (lib/logins.js): presented back, it is trusted.
onRecordAuthRequest((e) => require(`${__hooks}/lib/logins.js`).trustDevice(e));

// The owner lets an account in again from the panel: a row of login_unlocks, applied at once.
onRecordCreateRequest((e) => require(`${__hooks}/lib/logins.js`).unlockRequested(e), "login_unlocks");
onRecordUpdateRequest((e) => {
  throw new BadRequestError("An unlock is applied once; add a new row to unlock again.");
}, "login_unlocks");

// Every minute: the open attacks' counts written, those over closed, old counts and addresses swept.
cronAdd("transcriberLoginGuard", "* * * * *", () => require(`${__hooks}/lib/logins.js`).tick());

// The owner sees an attack's counts as they are now (they are written once a minute otherwise): written
// before the records API reads them (its list and view hooks run after the read). The panel names the
// collection by its id, a client by its name.
routerUse(new Middleware((e) => {
  const m = /^\/api\/collections\/([^/]+)\/records(\/[^/]+)?$/.exec(String(e.request.url.path));
  if (m && e.request.method === "GET") {
    let name = "";
    try {
      name = $app.findCollectionByNameOrId(m[1]).name;
    } catch (_) {
      // no such collection: PocketBase answers 404
    }
    if (name === "login_alerts") require(`${__hooks}/lib/logins.js`).flush();
  }
  return e.next();
}, 0, "transcriberLoginAlertsFresh"));

// What the guard writes, the panel reads: an edited alert or address would no longer tell what happened.
// The owner may delete an alert that is over, or an address (that account's next login from it counts
// as a new address's).
onRecordCreateRequest((e) => {
  throw new BadRequestError(`Rows of '${e.collection.name}' are written by the login guard only.`);
}, "login_alerts", "login_addresses");
onRecordUpdateRequest((e) => {
  throw new BadRequestError(`Rows of '${e.collection.name}' are kept as the login guard wrote them.`);
}, "login_alerts", "login_addresses");
onRecordDeleteRequest((e) => {
  if (e.record.getBool("ongoing")) throw new BadRequestError("This attack is still going; delete its row once it is over.");
  e.next();
}, "login_alerts");

// The login figures the workers export as metrics (transcriber_failed_logins_total,
// transcriber_accounts_under_attack).
routerAdd("GET", "/api/pipeline/logins", (e) => e.json(200, require(`${__hooks}/lib/logins.js`).figures()),
  $apis.requireAuth("services"));

// A signed-in sender changes their password (lib/password.js).
routerAdd("POST", "/api/transcriber/password", (e) => require(`${__hooks}/lib/password.js`).change(e),
  $apis.requireAuth("users"), $apis.bodyLimit(require(`${__hooks}/lib/password.js`).BODY_BYTES));
