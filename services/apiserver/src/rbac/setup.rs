//! What `--authorization-mode` starts: the authorizers in order behind
//! kube's `system:masters` superuser, and for `RBAC` the bootstrap policy
//! (reconciled), the informer and the aggregation controller, all ready
//! before the server answers its first request.

use std::sync::Arc;

use super::{aggregation, authorizer, informer, reconcile};
use crate::error::ApiError;
use crate::registry::Catalog;
use crate::routes::chain::authorization::{
    AlwaysAllow, AlwaysDeny, Authorizer, Mode, PrivilegedGroups, Union,
};

pub async fn authorizer(
    modes: &[Mode],
    catalog: &Arc<Catalog>,
) -> Result<Arc<dyn Authorizer>, ApiError> {
    let mut authorizers: Vec<Arc<dyn Authorizer>> =
        vec![Arc::new(PrivilegedGroups(vec!["system:masters".into()]))];
    for mode in modes {
        authorizers.push(match mode {
            Mode::AlwaysAllow => Arc::new(AlwaysAllow),
            Mode::AlwaysDeny => Arc::new(AlwaysDeny),
            Mode::Rbac => Arc::new(rbac(catalog).await?),
        });
    }
    Ok(Arc::new(Union(authorizers)))
}

async fn rbac(catalog: &Arc<Catalog>) -> Result<authorizer::Rbac, ApiError> {
    reconcile::bootstrap(catalog).await?;
    let mut shared = informer::start(catalog.clone()).await?;
    aggregation::settle(catalog, &mut shared).await?;
    actix_rt::spawn(aggregation::run(catalog.clone(), shared.clone()));
    Ok(authorizer::Rbac::new(shared))
}
