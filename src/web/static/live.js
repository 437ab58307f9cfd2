// Appends new session-log steps to a running job's page. The server renders each step's HTML
// (escaped there), so this file only places it.

(() => {
  const list = document.getElementById("timeline");
  if (list?.dataset.live !== "true" || !("EventSource" in window)) return;
  const status = document.getElementById("job-status");
  const live = document.getElementById("live");
  const url = `/jobs/${encodeURIComponent(list.dataset.job)}/events?after=${encodeURIComponent(list.dataset.after)}`;
  const source = new EventSource(url);

  source.addEventListener("step", (event) => {
    if (event.lastEventId && document.getElementById(`ev-${event.lastEventId}`)) return;
    document.getElementById("no-events")?.remove();
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    list.insertAdjacentHTML("beforeend", event.data);
    if (atBottom) list.lastElementChild?.scrollIntoView({ block: "end" });
  });
  source.addEventListener("status", (event) => {
    status.textContent = event.data;
    status.className = `status status-${event.data}`;
  });
  source.addEventListener("end", () => {
    source.close();
    live.textContent = "The job has finished.";
  });
})();
