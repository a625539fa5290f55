/** docs/console-api.md: passwords are 10 to 200 characters. Checked here only to answer before a round trip. */
export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 200;

export function passwordProblem(password: string): string | undefined {
  if (password.length < PASSWORD_MIN) return `At least ${PASSWORD_MIN} characters.`;
  if (password.length > PASSWORD_MAX) return `At most ${PASSWORD_MAX} characters.`;
  return undefined;
}
