// React hook that loads the signed-in user through the typed API wrapper.

import { useEffect, useState } from "react";

import { ApiError, fetchCurrentUser, type User } from "./api";

export type UserState =
  | { status: "loading" }
  | { status: "ready"; user: User }
  | { status: "signed-out" }
  | { status: "error"; message: string };

export function useCurrentUser(token: string | null): UserState {
  const [state, setState] = useState<UserState>({ status: "loading" });

  useEffect(() => {
    if (token === null) {
      setState({ status: "signed-out" });
      return;
    }
    let cancelled = false;
    fetchCurrentUser(token)
      .then((user) => {
        if (!cancelled) setState({ status: "ready", user });
      })
      .catch((err: unknown) => {
        if (cancelled) return;
        if (err instanceof ApiError && err.status === 401) {
          setState({ status: "signed-out" });
        } else {
          setState({ status: "error", message: String(err) });
        }
      });
    return () => {
      cancelled = true;
    };
  }, [token]);

  return state;
}

export function displayName(user: User): string {
  const local = user.email.split("@")[0] ?? user.email;
  return user.admin ? `${local} (admin)` : local;
}
