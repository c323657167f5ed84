// Thin, typed wrapper around the example service's HTTP API.

export interface User {
  id: string;
  email: string;
  roles: string[];
  admin: boolean;
}

export class ApiError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

const BASE_URL = "/api";

async function request<T>(path: string, token: string): Promise<T> {
  const response = await fetch(`${BASE_URL}${path}`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  if (!response.ok) {
    throw new ApiError(response.status, `GET ${path} failed with ${response.status}`);
  }
  return (await response.json()) as T;
}

export function fetchCurrentUser(token: string): Promise<User> {
  return request<User>("/me", token);
}

export function fetchProfile(token: string): Promise<User & { profile: Record<string, unknown> }> {
  return request("/me/profile", token);
}
