// The sender's page: sign in, upload (files or a voice note), the live list of
// their recordings, and each recording with its transcript beside the audio;
// the password changed, or reset by mail. Plain modules, no build step; the
// only dependency is PocketBase's JS SDK (vendor/, see scripts/vendor-sdk).
// This module starts the page and names its routes: #/ (the list, home.js),
// #/r/{id} (one recording, recording.js), #/password (a new one), #/forgot (ask
// for a reset mail), #/reset/{token} (the mail's link) (password.js); signed
// out, the sign-in (signin.js). What the screens share is shell.js's.
import * as i18n from "./i18n.js";
import { renderHome } from "./home.js";
import { renderForgot, renderPassword, renderReset } from "./password.js";
import { renderRecord } from "./recording.js";
import { ensureLive, main, renderHeader, renewOnce, route, setRouter, signOut, signedIn } from "./shell.js";
import { renderSignIn } from "./signin.js";
import { wireDrops } from "./uploads.js";

function routes() {
  renderHeader();
  const hash = window.location.hash;
  // The reset mail's link works signed in or not (the token says whose password it is).
  const reset = /^#\/reset\/([A-Za-z0-9._-]+)$/.exec(hash);
  if (reset) return renderReset(reset[1]);
  if (!signedIn()) return hash === "#/forgot" ? renderForgot() : renderSignIn();
  renewOnce();
  ensureLive();
  if (hash === "#/password") return renderPassword();
  const m = /^#\/r\/([A-Za-z0-9]+)$/.exec(hash);
  if (m) return renderRecord(m[1]);
  return renderHome();
}

function boot() {
  setRouter(routes);
  i18n.setLang(i18n.lang());
  document.getElementById("lang-switch").addEventListener("click", () => {
    i18n.setLang(i18n.other());
    const focus = document.activeElement && document.activeElement.id;
    route();
    if (focus) document.getElementById(focus)?.focus();
  });
  document.getElementById("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", () => {
    route();
    main().focus();
  });
  wireDrops();
  route();
}

boot();
