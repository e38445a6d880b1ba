//! Who owns what a caller starts (a run, a response, a conversation, a task, an approval wait):
//! a user-bound caller's things are its user's; a key bound to no user owns its own, under the
//! owner id `key:ID`; only admins reach across owners. The owner id is what the store keeps in
//! its `user_id` columns, so every lookup that matches the user also keeps keys apart.
//!
//! This module owns the spelling of owner ids and nothing else: tools and secrets act for a
//! *user*, which a key owner is not ([`user_of`]).

/// The prefix of the owner id of a key bound to no user.
pub const KEY_OWNER_PREFIX: &str = "key:";

/// The owner id of the key `key_id` (bound to no user).
pub fn key_owner(key_id: &str) -> String {
    format!("{KEY_OWNER_PREFIX}{key_id}")
}

/// Whether an owner id names a key rather than a user.
pub fn is_key_owner(owner: &str) -> bool {
    owner.starts_with(KEY_OWNER_PREFIX)
}

/// The user an owner id names: `None` for a key owner or no owner. Tools (`${caller.userId}`,
/// `${caller.secret.…}`) and `userScoped` agents act for this user only.
pub fn user_of(owner: Option<&str>) -> Option<&str> {
    owner.filter(|owner| !is_key_owner(owner))
}

/// Why a configured or requested user id cannot be a user: it would name a key's owner.
pub fn check_user_id(user_id: &str) -> Result<(), String> {
    if is_key_owner(user_id) {
        Err(format!(
            "`{user_id}` starts with `{KEY_OWNER_PREFIX}`, which names the owner of a key bound \
             to no user; choose another user id"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_owners_are_no_users() {
        let owner = key_owner("ci");
        assert_eq!(owner, "key:ci");
        assert!(is_key_owner(&owner));
        assert_eq!(user_of(Some(&owner)), None);
        assert_eq!(user_of(Some("alice")), Some("alice"));
        assert_eq!(user_of(None), None);
        assert!(check_user_id("alice").is_ok());
        assert!(check_user_id("key:x").is_err());
    }
}
