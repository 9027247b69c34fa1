// durableq dashboard: refresh the parts marked data-refresh="URL" every data-every milliseconds,
// while the tab is visible. The page works without it (reload to refresh).
"use strict";
(function () {
  function refresh(element) {
    if (document.hidden) return;
    fetch(element.dataset.refresh, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html !== null) {
          element.innerHTML = html;
          element.dataset.refreshed = String(Number(element.dataset.refreshed || 0) + 1);
        }
      })
      .catch(function () { /* the next tick tries again */ });
  }
  document.querySelectorAll("[data-refresh]").forEach(function (element) {
    setInterval(function () { refresh(element); }, Number(element.dataset.every || 2000));
  });
})();
