// The wait the test clients take on a secondary rate limit: none slept, each noted. A module of its
// own, apart from the nock helpers: a file that imports nock has its raw sockets held back.
import type { SecondaryRateLimitOptions } from "../../src/github/rate-limit.ts";

/** Every wait a secondary rate limit asked the test clients for, in ms; none is slept. */
export const secondaryRateLimitWaits: number[] = [];

export const noSecondaryWait: SecondaryRateLimitOptions = {
  wait: async (ms) => {
    secondaryRateLimitWaits.push(ms);
  },
};
