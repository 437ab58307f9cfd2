// Appends new session-log steps to a running job's page, and keeps its header's status, tokens and
// cost up to date. The server renders each step's HTML (escaped there) and each figure's text, so
// this file only places them. Each event's data is one line of JSON.

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
    list.insertAdjacentHTML("beforeend", JSON.parse(event.data));
    if (atBottom) list.lastElementChild?.scrollIntoView({ block: "end" });
  });
  source.addEventListener("spent", (event) => {
    const { tokens, cost } = JSON.parse(event.data);
    document.getElementById("job-tokens").textContent = tokens;
    document.getElementById("job-cost").textContent = cost;
  });
  source.addEventListener("status", (event) => {
    const value = JSON.parse(event.data);
    status.textContent = value;
    status.className = `status status-${value}`;
  });
  source.addEventListener("end", () => {
    source.close();
    live.textContent = "The job has finished.";
  });
})();
