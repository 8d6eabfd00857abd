/// <reference path="../pb_data/types.d.ts" />
// H7: every 4xx carries a stable `code` beside PocketBase's `message`, also
// the errors PocketBase makes itself (a failed login, a missing token, its
// body limit, its rate limiter). The middleware sits just outside the rate
// limiter (-1000) and the body limit (-990), so their errors pass through it.
routerUse(new Middleware((e) => {
  try {
    return e.next();
  } catch (err) {
    return require(`${__hooks}/lib/errors.js`).withCode(e, err);
  }
}, -1005, "transcriberErrorCodes"));
