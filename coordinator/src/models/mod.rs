//! Pure models the control loop consults: data and time are arguments, no IO.

pub mod forecast;
