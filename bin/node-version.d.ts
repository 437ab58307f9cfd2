export function nodeVersionProblem(current: string, engines: string): string | undefined;
export function requireSupportedNode(): void;
