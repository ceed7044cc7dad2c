// The source page's upload, with progress (issue #33). Progressive enhancement: without
// this script the form posts and the server answers with the file's page. With it, the
// form is sent by XMLHttpRequest (whose upload events feed the <progress>), the answer is
// JSON, and the file's status is polled until the worker has finished with it. Every
// text from the server goes in with textContent, never as markup.
"use strict";

(function () {
  const POLL_MS = 1000;
  const form = document.getElementById("upload-form");
  if (!form) return;
  const input = document.getElementById("upload-file");
  const progress = document.getElementById("upload-progress");
  const errorText = document.getElementById("upload-error");
  const statusText = document.getElementById("upload-status");
  const button = form.querySelector("button[type=submit]");
  const maxBytes = Number(form.dataset.maxBytes);

  function showError(message) {
    errorText.textContent = message;
    errorText.hidden = false;
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", "upload-hint upload-error");
    progress.hidden = true;
    button.disabled = false;
    input.focus();
  }

  function clearError() {
    errorText.textContent = "";
    errorText.hidden = true;
    input.removeAttribute("aria-invalid");
    input.setAttribute("aria-describedby", "upload-hint");
  }

  function say(text, file) {
    statusText.textContent = text;
    if (file) {
      const link = document.createElement("a");
      link.href = file.url;
      link.textContent = "File " + file.id;
      statusText.append(" ", link);
    }
  }

  function describe(file) {
    if (file.status === "delivered") {
      return "Delivered: " + Number(file.rows).toLocaleString("en") + " rows loaded.";
    }
    if (file.final) {
      // failed, duplicate: the status and what the loader said
      const status = file.status.charAt(0).toUpperCase() + file.status.slice(1);
      return file.error ? status + ": " + file.error : status + ".";
    }
    return "Received, " + file.status + "; waiting for the worker…";
  }

  function poll(file) {
    say(describe(file), file);
    if (file.final) {
      button.disabled = false;
      return;
    }
    window.setTimeout(function () {
      fetch(file.status_url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) throw new Error(String(response.status));
          return response.json();
        })
        .then(poll)
        .catch(function () {
          say("The file was received; its status could not be read. Open it:", file);
          button.disabled = false;
        });
    }, POLL_MS);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    clearError();
    const chosen = input.files[0];
    if (!chosen) return showError("Choose a CSV file to upload.");
    if (chosen.size > maxBytes) {
      return showError("The file is larger than the limit of " + maxBytes.toLocaleString("en") + " bytes.");
    }
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Accept", "application/json");
    request.responseType = "json";
    request.upload.addEventListener("progress", function (progressEvent) {
      if (progressEvent.lengthComputable) {
        progress.value = Math.round((progressEvent.loaded / progressEvent.total) * 100);
      }
    });
    request.addEventListener("load", function () {
      const body = request.response || {};
      if (request.status === 202) {
        progress.value = 100;
        form.reset();
        poll(body);
      } else {
        showError(body.error || "The upload was refused (HTTP " + request.status + ").");
        say("");
      }
    });
    request.addEventListener("error", function () {
      showError("The upload did not reach the server. Try again.");
      say("");
    });
    progress.value = 0;
    progress.hidden = false;
    button.disabled = true;
    say("Uploading " + chosen.name + "…");
    request.send(new FormData(form));
  });
})();
