//! One name per enum value, for the command line, the JSON document and messages alike.
//!
//! [`named_enum!`] declares an enum of plain values with the text each one is written as (and
//! any aliases users type, e.g. `RWS` for `copy`). From that one list it derives `name()`,
//! `Display`, parsing ([`Named::from_name`], case-insensitive, aliases included), serde
//! (the name is the JSON string) and clap's `ValueEnum` (the help lists every value with its
//! doc line), so no hand-written `name()` can drift from a `serde(rename)`.

/// Looks up a value by name or alias, ignoring case.
pub(crate) trait Named: Sized + Copy + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];
    /// The canonical name.
    fn name(self) -> &'static str;
    /// The other names users may type.
    fn aliases(self) -> &'static [&'static str];

    fn from_name(text: &str) -> Option<Self> {
        let text = text.trim();
        Self::ALL.iter().copied().find(|v| {
            v.name().eq_ignore_ascii_case(text)
                || v.aliases().iter().any(|a| a.eq_ignore_ascii_case(text))
        })
    }

    /// "a, b or c", for messages.
    fn choices() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// Declares a `Copy` enum whose values are written as the given strings. See the module doc.
///
/// ```ignore
/// named_enum! {
///     /// A memory operation.
///     pub enum MemOp {
///         /// sequential read
///         Read = "read",
///         Copy = "copy" | "rws",
///     }
/// }
/// ```
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $variant:ident = $text:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[doc = $doc])* $variant ),+
        }

        impl $crate::names::Named for $name {
            const ALL: &'static [$name] = &[$($name::$variant),+];

            fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            fn aliases(self) -> &'static [&'static str] {
                match self { $($name::$variant => &[$($alias),*]),+ }
            }
        }

        impl $name {
            /// The canonical name (as in the JSON document and on the command line).
            $vis fn name(self) -> &'static str {
                <$name as $crate::names::Named>::name(self)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use $crate::names::Named as _;
                let text = <::std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::from_name(&text).ok_or_else(|| {
                    ::serde::de::Error::custom(format!(
                        "'{text}' is not one of {}",
                        $name::choices()
                    ))
                })
            }
        }

        impl ::clap::ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                <$name as $crate::names::Named>::ALL
            }

            fn to_possible_value(&self) -> Option<::clap::builder::PossibleValue> {
                Some(match self {
                    $($name::$variant => {
                        let help: &str = concat!($($doc),*);
                        let value = ::clap::builder::PossibleValue::new($text)
                            $(.alias($alias))*;
                        if help.trim().is_empty() { value } else { value.help(help.trim()) }
                    }),+
                })
            }
        }
    };
}

pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    use super::Named;

    named_enum! {
        /// A test enum.
        enum Fruit {
            /// a red one
            Apple = "apple" | "pomme",
            Pear = "pear",
        }
    }

    #[test]
    fn one_name_serves_clap_serde_and_messages() {
        assert_eq!(Fruit::Apple.name(), "apple");
        assert_eq!(Fruit::from_name("POMME"), Some(Fruit::Apple));
        assert_eq!(Fruit::from_name(" pear "), Some(Fruit::Pear));
        assert_eq!(Fruit::from_name("plum"), None);
        assert_eq!(serde_json::to_string(&Fruit::Pear).unwrap(), "\"pear\"");
        assert_eq!(
            serde_json::from_str::<Fruit>("\"apple\"").unwrap(),
            Fruit::Apple
        );
        let error = serde_json::from_str::<Fruit>("\"plum\"").unwrap_err();
        assert!(error.to_string().contains("apple or pear"), "{error}");
        use clap::ValueEnum;
        assert_eq!(Fruit::from_str("pomme", true), Ok(Fruit::Apple));
        let value = Fruit::Apple.to_possible_value().unwrap();
        assert_eq!(value.get_help().unwrap().to_string(), "a red one");
        assert!(
            Fruit::Pear
                .to_possible_value()
                .unwrap()
                .get_help()
                .is_none()
        );
        assert_eq!(Fruit::Apple.to_string(), "apple");
    }
}
