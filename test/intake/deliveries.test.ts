// The delivery mapping parses what it reads: a payload of another shape is refused by name.
import { describe, expect, it } from "vitest";
import { fromIssueComment, fromReview, MalformedDelivery } from "../../src/intake/deliveries.ts";
import { examplePayload } from "../helpers/webhooks.ts";

describe("delivery mapping", () => {
  it("maps a real payload, a null review body as no text", () => {
    const payload = examplePayload("pull_request_review", "submitted");
    payload.installation = { id: 5 };
    payload.review.body = null;
    const delivery = fromReview(payload);
    expect(delivery).toMatchObject({ installationId: 5, itemKind: "pull_request" });
    expect(delivery.input.text).toBeNull();
  });

  // Found by test/fuzz: these were TypeErrors from inside the mapping and the trigger parser.
  it.each([
    ["comment", undefined, "malformed issue_comment webhook: comment: "],
    ["comment", { id: 1, body: 5, html_url: "u" }, "comment.body: "],
    ["sender", null, "sender: "],
    ["installation", undefined, "installation: missing: not a GitHub App delivery"],
  ])("refuses %s = %j as a MalformedDelivery", (field, value, message) => {
    const payload = examplePayload("issue_comment", "created");
    payload.installation = { id: 5 };
    payload[field] = value;
    expect(() => fromIssueComment(payload)).toThrow(MalformedDelivery);
    expect(() => fromIssueComment(payload)).toThrow(message);
  });
});
