/// <reference path="../pb_data/types.d.ts" />
// H2: wrong passwords are limited per account, whatever the address (lib/logins.js);
// PocketBase's own limiter limits every auth door per address (the rate limit migrations).
onRecordAuthWithPasswordRequest((e) => require(`${__hooks}/lib/logins.js`).guard(e));
