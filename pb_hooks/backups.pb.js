/// <reference path="../pb_data/types.d.ts" />
// What stays out of PocketBase's backups (lib/private.js): a backup carries
// the databases and every stored file, never the service account's
// password. A restore in place keeps the running directory's own copies.
onBackupCreate((e) => {
  e.exclude = e.exclude.concat(require(`${__hooks}/lib/private.js`).PRIVATE);
  return e.next();
});

onBackupRestore((e) => {
  e.exclude = e.exclude.concat(require(`${__hooks}/lib/private.js`).PRIVATE);
  return e.next();
});
